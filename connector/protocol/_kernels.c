/* connector.protocol._kernels: the client's per-record loops, compiled when pymq is built.
 *
 * Pull answers indexed and checked (connector/protocol/scan.py), batches encoded
 * (connector/protocol/fastbatch.py), Arrow columns filled (connector/spark/columnar.py).
 * Those modules say what each computes and are the only importers (through
 * connector/protocol/native.py); connector/protocol/_kernels_py.py is the same in plain
 * Python (without a C compiler, and the tests' reference). Record layout: the header
 * table of connector/protocol/record.py (the offsets below are its OFF_* names). A pull
 * answer comes from the network: every length in it is checked against the bytes left.
 */
#include "_kernels_common.h"

#define HEADER_SIZE 88
#define MESSAGE_MAGIC 0xDAA320A7
#define OFF_BODYCRC 8
#define OFF_QUEUEOFFSET 20
#define OFF_PHYSICALOFFSET 28
#define OFF_SYSFLAG 36
#define OFF_BORNTIMESTAMP 40
#define OFF_STORETIMESTAMP 56
#define OFF_STOREHOST 64
#define OFF_BODYLEN 84

static const char HEXD[] = "0123456789ABCDEF";

static PyObject *
out_of_bounds(const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s: out of bounds", what);
    return NULL;
}

/* the offset msgId of the record at p (p + 72 <= buffer length): STOREHOST then
 * PHYSICALOFFSET, 32 hex digits */
static inline void
hex_id(const uint8_t *buf, int64_t p, uint8_t *id)
{
    for (int k = 0; k < 8; k++) {
        uint8_t c = buf[p + OFF_STOREHOST + k];
        id[2 * k] = (uint8_t)HEXD[c >> 4];
        id[2 * k + 1] = (uint8_t)HEXD[c & 15];
        c = buf[p + OFF_PHYSICALOFFSET + k];
        id[16 + 2 * k] = (uint8_t)HEXD[c >> 4];
        id[16 + 2 * k + 1] = (uint8_t)HEXD[c & 15];
    }
}

/* walk(buf, out) -> (records, -1) or (records so far, bad position); out: (7, cap) int64,
 * one row per column: start, size, body_start, body_len, props_start, props_len,
 * queue_offset (rows, so each column is contiguous) */
static PyObject *
k_walk(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t end, out_n;
    if (check_nargs(nargs, 2, "walk") < 0) {
        return NULL;
    }
    const uint8_t *buf0 = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &end);
    int64_t *out0 = buf0 ? bufs_get(&b, args[1], "out", 8, K_I64, 1, 2, 0, &out_n) : 0;
    if (out0 == NULL) {
        bufs_release(&b);
        return NULL;
    }
    /* restrict: a store to out may otherwise alias buf (uint8_t aliases anything), and
     * every byte read would be reloaded after it (measured: 2x the time a record) */
    const uint8_t *restrict buf = buf0;
    int64_t *restrict out = out0;
    if (b.views[1].shape[0] != 7) {
        bufs_release(&b);
        return out_of_bounds("walk: out must have 7 rows");
    }
    int64_t cap = b.views[1].shape[1], n = 0, pos = 0, bad = -1;
    K_BEGIN_RELEASE(end >= K_LONG_BYTES)
    while (pos < end) {
        if (pos + HEADER_SIZE > end || n >= cap) {
            bad = pos;
            break;
        }
        int64_t size = get_u32(buf, pos);
        if (size < HEADER_SIZE || pos + size > end || get_u32(buf, pos + 4) != MESSAGE_MAGIC) {
            bad = pos;
            break;
        }
        int64_t body_len = get_u32(buf, pos + OFF_BODYLEN);
        int64_t body_start = pos + HEADER_SIZE, topic_pos = body_start + body_len;
        if (topic_pos + 1 > pos + size) {
            bad = pos;
            break;
        }
        int64_t props_len_pos = topic_pos + 1 + buf[topic_pos];
        if (props_len_pos + 2 > pos + size) {
            bad = pos;
            break;
        }
        int64_t props_len = ((int64_t)buf[props_len_pos] << 8) | buf[props_len_pos + 1];
        if (props_len_pos + 2 + props_len != pos + size) {
            bad = pos;
            break;
        }
        out[n] = pos;
        out[cap + n] = size;
        out[2 * cap + n] = body_start;
        out[3 * cap + n] = body_len;
        out[4 * cap + n] = props_len_pos + 2;
        out[5 * cap + n] = props_len;
        out[6 * cap + n] = get_i64(buf, pos + OFF_QUEUEOFFSET);
        n++;
        pos += size;
    }
    K_END_RELEASE()
    bufs_release(&b);
    return Py_BuildValue("LL", (long long)n, (long long)bad);
}

/* gather(buf, starts, lens, out, offsets): buf[starts[i]:starts[i]+lens[i]] back to
 * back into out (uint8), offsets (int32, one more than records) where each begins */
static PyObject *
k_gather(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t n, ns, nl, no, noff;
    if (check_nargs(nargs, 5, "gather") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &n);
    const int64_t *st = buf ? bufs_get(&b, args[1], "starts", 8, K_I64, 0, 1, 0, &ns) : 0;
    const int64_t *ln = st ? bufs_get(&b, args[2], "lens", 8, K_I64, 0, 1, 0, &nl) : 0;
    uint8_t *out = ln ? bufs_get(&b, args[3], "out", 1, K_U8, 1, 0, 0, &no) : 0;
    int32_t *off = out ? bufs_get(&b, args[4], "offsets", 4, K_I32, 1, 1, 0, &noff) : 0;
    if (off == NULL) {
        bufs_release(&b);
        return NULL;
    }
    if (nl < ns || noff < ns + 1) {
        bufs_release(&b);
        return out_of_bounds("gather: arrays");
    }
    int64_t pos = 0;
    int ok = 1;
    K_BEGIN_RELEASE(ns >= K_LONG_ITEMS)
    for (Py_ssize_t i = 0; i < ns; i++) {
        int64_t s = st[i], l = ln[i];
        if (s < 0 || l < 0 || s + l > n || pos + l > no || pos + l > INT32_MAX) {
            ok = 0;
            break;
        }
        off[i] = (int32_t)pos;
        memcpy(out + pos, buf + s, (size_t)l);
        pos += l;
    }
    if (ok) {
        off[ns] = (int32_t)pos;
    }
    K_END_RELEASE()
    bufs_release(&b);
    if (!ok) {
        return out_of_bounds("gather: piece");
    }
    Py_RETURN_NONE;
}

/* rows(buf, starts, out): row i of out (uint8, (records, width)) = buf[starts[i]:+width] */
static PyObject *
k_rows(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t n, ns, no;
    if (check_nargs(nargs, 3, "rows") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &n);
    const int64_t *st = buf ? bufs_get(&b, args[1], "starts", 8, K_I64, 0, 1, 0, &ns) : 0;
    uint8_t *out = st ? bufs_get(&b, args[2], "out", 1, K_U8, 1, 2, 0, &no) : 0;
    if (out == NULL) {
        bufs_release(&b);
        return NULL;
    }
    Py_ssize_t width = b.views[2].shape[1];
    if (b.views[2].shape[0] < ns) {
        bufs_release(&b);
        return out_of_bounds("rows: out");
    }
    for (Py_ssize_t i = 0; i < ns; i++) {
        if (st[i] < 0 || st[i] + width > n) {
            bufs_release(&b);
            return out_of_bounds("rows: start");
        }
        memcpy(out + i * width, buf + st[i], (size_t)width);
    }
    bufs_release(&b);
    Py_RETURN_NONE;
}

static inline int
same(const uint8_t *a, int64_t pos, int64_t n, const uint8_t *b, int64_t bpos, int64_t bn)
{
    return n == bn && (n == 0 || memcmp(a + pos, b + bpos, (size_t)n) == 0);
}

/* split_props(buf, starts, lens, names, name_starts, pairs, counts, found, repeated)
 *     -> pairs found; see scan.split_properties */
static PyObject *
k_split_props(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t n, ns, nl, nn, nw, np_, nc, nf, nr;
    if (check_nargs(nargs, 9, "split_props") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &n);
    const int64_t *st = buf ? bufs_get(&b, args[1], "starts", 8, K_I64, 0, 1, 0, &ns) : 0;
    const int64_t *ln = st ? bufs_get(&b, args[2], "lens", 8, K_I64, 0, 1, 0, &nl) : 0;
    const uint8_t *names = ln ? bufs_get(&b, args[3], "names", 1, K_U8, 0, 0, 0, &nn) : 0;
    const int64_t *ws = names ? bufs_get(&b, args[4], "name_starts", 8, K_I64, 0, 1, 0, &nw) : 0;
    int64_t *pairs = ws ? bufs_get(&b, args[5], "pairs", 8, K_I64, 1, 2, 4, &np_) : 0;
    int64_t *counts = pairs ? bufs_get(&b, args[6], "counts", 8, K_I64, 1, 1, 0, &nc) : 0;
    int64_t *found = counts ? bufs_get(&b, args[7], "found", 8, K_I64, 1, 0, 0, &nf) : 0;
    int64_t *rep = found ? bufs_get(&b, args[8], "repeated", 8, K_I64, 1, 1, 0, &nr) : 0;
    if (rep == NULL) {
        bufs_release(&b);
        return NULL;
    }
    int64_t wanted = nw - 1, cap = np_ / 4;
    if (nl < ns || nc < ns || nr < 1 || wanted < 0 || nf < ns * wanted) {
        bufs_release(&b);
        return out_of_bounds("split_props: arrays");
    }
    for (int64_t w = 0; w < wanted; w++) {
        if (ws[w] < 0 || ws[w] > ws[w + 1] || ws[w + 1] > nn) {
            bufs_release(&b);
            return out_of_bounds("split_props: name_starts");
        }
    }
    int64_t k = 0;
    int ok = 1;
    K_BEGIN_RELEASE(n >= K_LONG_BYTES || ns >= K_LONG_ITEMS)
    for (Py_ssize_t r = 0; r < ns && ok; r++) {
        int64_t pos = st[r], end = pos + ln[r], first = k;
        if (pos < 0 || ln[r] < 0 || end > n) {
            ok = 0;
            break;
        }
        while (pos < end) {
            int64_t stop = pos;
            while (stop < end && buf[stop] != 2) {
                stop++;
            }
            int64_t sep = pos;
            while (sep < stop && buf[sep] != 1) {
                sep++;
            }
            if (sep < stop && sep > pos) { /* a pair without separator or name is skipped */
                if (k >= cap) {
                    ok = 0;
                    break;
                }
                int64_t *pr = pairs + k * 4;
                pr[0] = pos;
                pr[1] = sep - pos;
                pr[2] = sep + 1;
                pr[3] = stop - sep - 1;
                for (int64_t w = 0; w < wanted; w++) {
                    if (same(buf, pos, sep - pos, names, ws[w], ws[w + 1] - ws[w])) {
                        found[r * wanted + w] = k; /* repeated: the last wins, as a dict */
                    }
                }
                for (int64_t q = first; q < k; q++) {
                    if (same(buf, pos, sep - pos, buf, pairs[q * 4], pairs[q * 4 + 1])) {
                        rep[0] = 1;
                    }
                }
                k++;
            }
            pos = stop + 1;
        }
        counts[r] = k - first;
    }
    K_END_RELEASE()
    bufs_release(&b);
    if (!ok) {
        return out_of_bounds("split_props: properties");
    }
    return PyLong_FromLongLong(k);
}

/* the per-record inputs of fields / check_bodies / offset_ids, checked */
typedef struct {
    const uint8_t *buf;
    Py_ssize_t n, ns;
    const int64_t *st, *bs, *bl;
} Records;

static int
records_get(Bufs *b, PyObject *const *args, int bodies, Records *r)
{
    Py_ssize_t nb = 0, nl = 0;
    r->buf = bufs_get(b, args[0], "buf", 1, K_U8, 0, 0, 0, &r->n);
    r->st = r->buf ? bufs_get(b, args[1], "starts", 8, K_I64, 0, 1, 0, &r->ns) : 0;
    if (r->st == NULL) {
        return -1;
    }
    if (bodies) {
        r->bs = bufs_get(b, args[2], "body_start", 8, K_I64, 0, 1, 0, &nb);
        r->bl = r->bs ? bufs_get(b, args[3], "body_len", 8, K_I64, 0, 1, 0, &nl) : 0;
        if (r->bl == NULL) {
            return -1;
        }
        if (nb < r->ns || nl < r->ns) {
            out_of_bounds("body columns");
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < r->ns; i++) {
        if (r->st[i] < 0 || r->st[i] + HEADER_SIZE > r->n ||
            (bodies && (r->bs[i] < 0 || r->bl[i] < 0 || r->bs[i] + r->bl[i] > r->n))) {
            out_of_bounds("record");
            return -1;
        }
    }
    return 0;
}

static inline int
body_crc_ok(const Records *r, Py_ssize_t i)
{
    int64_t crc = crc32_range(r->buf, r->bs[i], r->bs[i] + r->bl[i], 0) & 0x7FFFFFFF;
    return crc == get_u32(r->buf, r->st[i] + OFF_BODYCRC);
}

/* fields(buf, starts, body_start, body_len, out, ids) -> the first record whose body CRC
 * does not match, or -1; out (records, 3): SYSFLAG, BORNTIMESTAMP, STORETIMESTAMP;
 * ids (records, 32): the offset msgIds */
static PyObject *
k_fields(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Records r;
    Py_ssize_t no, ni;
    if (check_nargs(nargs, 6, "fields") < 0 || records_get(&b, args, 1, &r) < 0) {
        bufs_release(&b);
        return NULL;
    }
    int64_t *out = bufs_get(&b, args[4], "out", 8, K_I64, 1, 2, 3, &no);
    uint8_t *ids = out ? bufs_get(&b, args[5], "ids", 1, K_U8, 1, 2, 32, &ni) : 0;
    if (ids == NULL || no < r.ns * 3 || ni < r.ns * 32) {
        bufs_release(&b);
        return ids == NULL ? NULL : out_of_bounds("fields: arrays");
    }
    int64_t bad = -1;
    K_BEGIN_RELEASE(r.n >= K_LONG_BYTES || r.ns >= K_LONG_ITEMS)
    for (Py_ssize_t i = 0; i < r.ns; i++) {
        int64_t p = r.st[i];
        out[i * 3] = get_u32(r.buf, p + OFF_SYSFLAG);
        out[i * 3 + 1] = get_i64(r.buf, p + OFF_BORNTIMESTAMP);
        out[i * 3 + 2] = get_i64(r.buf, p + OFF_STORETIMESTAMP);
        if (bad < 0 && !body_crc_ok(&r, i)) {
            bad = i;
        }
        hex_id(r.buf, p, ids + i * 32);
    }
    K_END_RELEASE()
    bufs_release(&b);
    return PyLong_FromLongLong(bad);
}

/* check_bodies(buf, starts, body_start, body_len, sys_flag) -> first bad CRC or -1 */
static PyObject *
k_check_bodies(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Records r;
    Py_ssize_t nf;
    if (check_nargs(nargs, 5, "check_bodies") < 0 || records_get(&b, args, 1, &r) < 0) {
        bufs_release(&b);
        return NULL;
    }
    int64_t *flags = bufs_get(&b, args[4], "sys_flag", 8, K_I64, 1, 1, 0, &nf);
    if (flags == NULL || nf < r.ns) {
        bufs_release(&b);
        return flags == NULL ? NULL : out_of_bounds("check_bodies: sys_flag");
    }
    int64_t bad = -1;
    K_BEGIN_RELEASE(r.n >= K_LONG_BYTES || r.ns >= K_LONG_ITEMS)
    for (Py_ssize_t i = 0; i < r.ns; i++) {
        flags[i] = get_u32(r.buf, r.st[i] + OFF_SYSFLAG);
        if (bad < 0 && !body_crc_ok(&r, i)) {
            bad = i;
        }
    }
    K_END_RELEASE()
    bufs_release(&b);
    return PyLong_FromLongLong(bad);
}

/* offset_ids(buf, starts, ids): ids (records, 32) the offset msgIds in hex */
static PyObject *
k_offset_ids(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Records r;
    Py_ssize_t ni;
    if (check_nargs(nargs, 3, "offset_ids") < 0 || records_get(&b, args, 0, &r) < 0) {
        bufs_release(&b);
        return NULL;
    }
    uint8_t *ids = bufs_get(&b, args[2], "ids", 1, K_U8, 1, 2, 32, &ni);
    if (ids == NULL || ni < r.ns * 32) {
        bufs_release(&b);
        return ids == NULL ? NULL : out_of_bounds("offset_ids: ids");
    }
    for (Py_ssize_t i = 0; i < r.ns; i++) {
        hex_id(r.buf, r.st[i], ids + i * 32);
    }
    bufs_release(&b);
    Py_RETURN_NONE;
}

/* encode_plain(body, body_off, ids, id_first, tags, tags_off, has_tag, uniq, tag_prefix,
 *     magic, out): see fastbatch.encode_plain */
static PyObject *
k_encode_plain(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t nb, nbo, nid, nt, nto, nh, nu, ntp, no;
    int64_t id_first, magic;
    if (check_nargs(nargs, 11, "encode_plain") < 0) {
        return NULL;
    }
    const uint8_t *body = bufs_get(&b, args[0], "body", 1, K_U8, 0, 0, 0, &nb);
    const int64_t *bo = body ? bufs_get(&b, args[1], "body_off", 8, K_I64, 0, 1, 0, &nbo) : 0;
    const uint8_t *ids = bo ? bufs_get(&b, args[2], "ids", 1, K_U8, 0, 0, 0, &nid) : 0;
    if (ids == NULL || arg_i64(args[3], "id_first", &id_first) < 0) {
        bufs_release(&b);
        return NULL;
    }
    const uint8_t *tags = bufs_get(&b, args[4], "tags", 1, K_U8, 0, 0, 0, &nt);
    const int64_t *to = tags ? bufs_get(&b, args[5], "tags_off", 8, K_I64, 0, 1, 0, &nto) : 0;
    const uint8_t *has = to ? bufs_get(&b, args[6], "has_tag", 1, K_U8, 0, 1, 0, &nh) : 0;
    const uint8_t *uq = has ? bufs_get(&b, args[7], "uniq", 1, K_U8, 0, 0, 0, &nu) : 0;
    const uint8_t *tp = uq ? bufs_get(&b, args[8], "tag_prefix", 1, K_U8, 0, 0, 0, &ntp) : 0;
    if (tp == NULL || arg_i64(args[9], "magic", &magic) < 0) {
        bufs_release(&b);
        return NULL;
    }
    uint8_t *out = bufs_get(&b, args[10], "out", 1, K_U8, 1, 0, 0, &no);
    if (out == NULL) {
        bufs_release(&b);
        return NULL;
    }
    int64_t n = nbo - 1;
    if (n < 0 || nto < n + 1 || nh < n || (id_first < 0 ? nid < n * 32 : nid < 28)) {
        bufs_release(&b);
        return out_of_bounds("encode_plain: arrays");
    }
    int ok = 1;
    K_BEGIN_RELEASE(n >= K_LONG_ITEMS || nb >= K_LONG_BYTES)
    int64_t pos = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t b0 = bo[i], b1 = bo[i + 1], t0 = to[i], t1 = to[i + 1];
        int64_t props = nu + 33;
        if (has[i]) {
            props += ntp + t1 - t0 + 1;
        }
        int64_t total = 22 + (b1 - b0) + props;
        if (b0 < 0 || b1 < b0 || b1 > nb || (has[i] && (t0 < 0 || t1 < t0 || t1 > nt)) ||
            pos + total > no) {
            ok = 0;
            break;
        }
        put_i32(out, pos, total);
        put_i32(out, pos + 4, magic);
        put_i32(out, pos + 8, crc32_range(body, b0, b1, 0) & 0x7FFFFFFF);
        put_i32(out, pos + 12, 0);
        put_i32(out, pos + 16, b1 - b0);
        pos += 20;
        memcpy(out + pos, body + b0, (size_t)(b1 - b0));
        pos += b1 - b0;
        out[pos] = (uint8_t)(props >> 8);
        out[pos + 1] = (uint8_t)props;
        pos += 2;
        memcpy(out + pos, uq, (size_t)nu);
        pos += nu;
        if (id_first < 0) { /* ids: 32 bytes a message */
            memcpy(out + pos, ids + i * 32, 32);
        }
        else { /* ids: a 28-byte head, then the 16-bit counter from id_first in hex */
            memcpy(out + pos, ids, 28);
            int64_t v = (id_first + i) & 0xFFFF;
            for (int d = 0; d < 4; d++) {
                out[pos + 28 + d] = (uint8_t)HEXD[(v >> (12 - 4 * d)) & 15];
            }
        }
        out[pos + 32] = 2;
        pos += 33;
        if (has[i]) {
            memcpy(out + pos, tp, (size_t)ntp);
            pos += ntp;
            memcpy(out + pos, tags + t0, (size_t)(t1 - t0));
            pos += t1 - t0;
            out[pos++] = 2;
        }
    }
    K_END_RELEASE()
    bufs_release(&b);
    if (!ok) {
        return out_of_bounds("encode_plain: message");
    }
    Py_RETURN_NONE;
}

/* fill(buf, specials, special_starts, compressed_flag, starts, body_start, body_len,
 *     props_start, props_len, queue_offset, n, ints, body, body_off, pair_data, pair_off,
 *     map_off, special, special_off, valid) -> (status, pairs): see
 *     connector.spark.columnar._fill */
static PyObject *
k_fill(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t nbuf, nsp, nss, len, cap = PY_SSIZE_T_MAX;
    Py_ssize_t nints, nbody, nbo, npd, npo, nmo, nspec, nso, nvalid;
    int64_t compressed, n;
    const int64_t *in[6];
    if (check_nargs(nargs, 20, "fill") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &nbuf);
    const uint8_t *sp = buf ? bufs_get(&b, args[1], "specials", 1, K_U8, 0, 0, 0, &nsp) : 0;
    const int64_t *ss = sp ? bufs_get(&b, args[2], "special_starts", 8, K_I64, 0, 1, 0, &nss) : 0;
    if (ss == NULL || arg_i64(args[3], "compressed_flag", &compressed) < 0) {
        goto fail;
    }
    for (int i = 0; i < 6; i++) {
        if ((in[i] = bufs_get(&b, args[4 + i], "column", 8, K_I64, 0, 1, 0, &len)) == NULL) {
            goto fail;
        }
        cap = len < cap ? len : cap;
    }
    if (arg_i64(args[10], "n", &n) < 0) {
        goto fail;
    }
    int64_t *ints = bufs_get(&b, args[11], "ints", 8, K_I64, 1, 2, 0, &nints);
    uint8_t *body = ints ? bufs_get(&b, args[12], "body", 1, K_U8, 1, 0, 0, &nbody) : 0;
    int32_t *body_off = body ? bufs_get(&b, args[13], "body_off", 4, K_I32, 1, 1, 0, &nbo) : 0;
    uint8_t *pd = body_off ? bufs_get(&b, args[14], "pair_data", 1, K_U8, 1, 2, 0, &npd) : 0;
    int32_t *po = pd ? bufs_get(&b, args[15], "pair_off", 4, K_I32, 1, 2, 0, &npo) : 0;
    int32_t *map_off = po ? bufs_get(&b, args[16], "map_off", 4, K_I32, 1, 1, 0, &nmo) : 0;
    uint8_t *spec = map_off ? bufs_get(&b, args[17], "special", 1, K_U8, 1, 2, 0, &nspec) : 0;
    int32_t *so = spec ? bufs_get(&b, args[18], "special_off", 4, K_I32, 1, 2, 0, &nso) : 0;
    uint8_t *valid = so ? bufs_get(&b, args[19], "valid", 1, K_U8, 1, 2, 0, &nvalid) : 0;
    if (valid == NULL) {
        goto fail;
    }
    /* row lengths of the 2-D outputs */
    Py_ssize_t ints_w = b.views[9].shape[1], pd_w = b.views[12].shape[1];
    Py_ssize_t po_w = b.views[13].shape[1], spec_w = b.views[15].shape[1];
    Py_ssize_t so_w = b.views[16].shape[1], valid_w = b.views[17].shape[1];
    if (nss < 4 || n < 0 || n > cap || b.views[9].shape[0] < 3 || ints_w < n ||
        nbo < n + 1 || b.views[12].shape[0] < 2 || b.views[13].shape[0] < 2 || po_w < 1 ||
        nmo < n + 1 || b.views[15].shape[0] < 3 || b.views[16].shape[0] < 3 || so_w < n + 1 ||
        b.views[17].shape[0] < 3 || valid_w < n) {
        bufs_release(&b);
        return out_of_bounds("fill: arrays");
    }
    for (int w = 0; w < 3; w++) {
        if (ss[w] < 0 || ss[w] > ss[w + 1] || ss[w + 1] > nsp) {
            bufs_release(&b);
            return out_of_bounds("fill: special_starts");
        }
    }
    for (int64_t i = 0; i < n; i++) {
        if (in[0][i] < 0 || in[0][i] + HEADER_SIZE > nbuf || in[1][i] < 0 || in[2][i] < 0 ||
            in[1][i] + in[2][i] > nbuf || in[3][i] < 0 || in[4][i] < 0 ||
            in[3][i] + in[4][i] > nbuf) {
            bufs_release(&b);
            return out_of_bounds("fill: record");
        }
    }
    const int64_t *starts = in[0], *body_start = in[1], *body_len = in[2];
    const int64_t *props_start = in[3], *props_len = in[4], *queue_offset = in[5];
    int64_t *offsets = ints, *born_us = ints + ints_w, *stored_us = ints + 2 * ints_w;
    uint8_t *names = pd, *values = pd + pd_w;
    int32_t *name_off = po, *value_off = po + po_w;
    uint8_t *msg_ids = spec, *tag_data = spec + spec_w, *key_data = spec + 2 * spec_w;
    int32_t *msg_id_off = so, *tag_off = so + so_w, *key_off = so + 2 * so_w;
    uint8_t *msg_id_ok = valid, *tag_ok = valid + valid_w, *key_ok = valid + 2 * valid_w;
    const uint8_t *uniq_name = sp + ss[0], *tags_name = sp + ss[1], *keys_name = sp + ss[2];
    int64_t uniq_n = ss[1] - ss[0], tags_n = ss[2] - ss[1], keys_n = ss[3] - ss[2];
    int row_by_row = 0, ok = 1;
    int64_t status = -1, body_at = 0, npairs = 0, name_at = 0, value_at = 0;
    int64_t msg_id_at = 0, tag_at = 0, key_at = 0;
    K_BEGIN_RELEASE(n >= K_LONG_ITEMS || nbody >= K_LONG_BYTES)
    for (int64_t i = 0; i < n && ok; i++) {
        int64_t p = starts[i], b_start = body_start[i], b_len = body_len[i];
        int64_t crc = crc32_range(buf, b_start, b_start + b_len, 0) & 0x7FFFFFFF;
        if (crc != get_u32(buf, p + OFF_BODYCRC)) {
            status = i + 1;
            goto done;
        }
        if (row_by_row) {
            continue;
        }
        if (get_u32(buf, p + OFF_SYSFLAG) & compressed) {
            row_by_row = 1;
            continue;
        }
        offsets[i] = queue_offset[i];
        born_us[i] = (int64_t)((uint64_t)get_i64(buf, p + OFF_BORNTIMESTAMP) * 1000); /* ms->us */
        stored_us[i] = (int64_t)((uint64_t)get_i64(buf, p + OFF_STORETIMESTAMP) * 1000);
        if (body_at + b_len > nbody) {
            ok = 0;
            break;
        }
        body_off[i] = (int32_t)body_at;
        memcpy(body + body_at, buf + b_start, (size_t)b_len);
        body_at += b_len;
        map_off[i] = (int32_t)npairs;
        int64_t first = npairs;
        int64_t uniq_at = -1, uniq_len = 0, tags_at = -1, tags_len = 0, keys_at = -1, keys_len = 0;
        int64_t pos = props_start[i], props_end = pos + props_len[i];
        while (pos < props_end && !row_by_row) {
            int64_t stop = pos, sep = -1;
            while (stop < props_end) {
                uint8_t c = buf[stop];
                if (c == 2) {
                    break;
                }
                if (c == 1 && sep < 0) {
                    sep = stop;
                }
                stop++;
            }
            if (sep > pos) {
                int64_t name_len = sep - pos, value_len = stop - sep - 1;
                for (int64_t q = first; q < npairs; q++) {
                    int64_t other = name_off[q];
                    if (same(buf, pos, name_len, names, other, name_off[q + 1] - other)) {
                        row_by_row = 1; /* named twice: the last one wins, as in a dict */
                    }
                }
                if (row_by_row) {
                    break;
                }
                if (npairs + 1 >= po_w || name_at + name_len > pd_w ||
                    value_at + value_len > pd_w) {
                    ok = 0;
                    break;
                }
                name_off[npairs] = (int32_t)name_at;
                value_off[npairs] = (int32_t)value_at;
                memcpy(names + name_at, buf + pos, (size_t)name_len);
                memcpy(values + value_at, buf + sep + 1, (size_t)value_len);
                name_at += name_len;
                value_at += value_len;
                npairs++;
                name_off[npairs] = (int32_t)name_at;
                if (same(buf, pos, name_len, uniq_name, 0, uniq_n)) {
                    uniq_at = sep + 1;
                    uniq_len = value_len;
                }
                else if (same(buf, pos, name_len, tags_name, 0, tags_n)) {
                    tags_at = sep + 1;
                    tags_len = value_len;
                }
                else if (same(buf, pos, name_len, keys_name, 0, keys_n)) {
                    keys_at = sep + 1;
                    keys_len = value_len;
                }
            }
            pos = stop + 1;
        }
        if (row_by_row || !ok) {
            continue;
        }
        if (msg_id_at + (uniq_len > 0 ? uniq_len : 32) > spec_w || tag_at + tags_len > spec_w ||
            key_at + keys_len > spec_w) {
            ok = 0;
            break;
        }
        msg_id_off[i] = (int32_t)msg_id_at;
        msg_id_ok[i] = 1;
        if (uniq_len > 0) {
            memcpy(msg_ids + msg_id_at, buf + uniq_at, (size_t)uniq_len);
            msg_id_at += uniq_len;
        }
        else { /* no UNIQ_KEY (not sent by a pymq producer): the offset msgId */
            hex_id(buf, p, msg_ids + msg_id_at);
            msg_id_at += 32;
        }
        tag_off[i] = (int32_t)tag_at;
        tag_ok[i] = tags_len > 0;
        if (tags_len > 0) {
            memcpy(tag_data + tag_at, buf + tags_at, (size_t)tags_len);
        }
        tag_at += tags_len;
        key_off[i] = (int32_t)key_at;
        key_ok[i] = keys_len > 0;
        if (keys_len > 0) {
            memcpy(key_data + key_at, buf + keys_at, (size_t)keys_len);
        }
        key_at += keys_len;
    }
    if (!ok) {
        goto done;
    }
    if (row_by_row) {
        status = 0;
        goto done;
    }
    body_off[n] = (int32_t)body_at;
    map_off[n] = (int32_t)npairs;
    name_off[npairs] = (int32_t)name_at;
    value_off[npairs] = (int32_t)value_at;
    msg_id_off[n] = (int32_t)msg_id_at;
    tag_off[n] = (int32_t)tag_at;
    key_off[n] = (int32_t)key_at;
done:
    K_END_RELEASE()
    bufs_release(&b);
    if (!ok) {
        return out_of_bounds("fill: columns");
    }
    return Py_BuildValue("LL", (long long)status, (long long)npairs);
fail:
    bufs_release(&b);
    return NULL;
}

/* encode_messages(msgs, topic, head, first, max_body, topic_len) -> (data, sizes) | None
 * A batch request's entries for messages that are only a body and perhaps tags (see
 * connector/client/encoding.py's Encoder.plain_list), laid out as the per-message path
 * lays them out (TAGS, then UNIQ_KEY from the 28-byte head and the 16-bit counter from
 * first); sizes: each one's record size. None, with nothing made, when a message is not
 * such a message (another topic, keys, properties, a delay level, a flag, a body that is
 * not bytes or is empty or over max_body, tags that are not text or hold a separator):
 * the caller's per-message path then says what is wrong with it. */
#define PROPS_MAX 32767
#define UNIQ_PREFIX "UNIQ_KEY\x01"
#define TAGS_PREFIX "TAGS\x01"

typedef struct {
    PyObject *body, *tags; /* references held until the end */
    const char *tag;
    Py_ssize_t tag_len;
} Plain;

static PyObject *s_topic, *s_keys, *s_properties, *s_delay_level, *s_flag, *s_body, *s_tags;

static int
attr_true(PyObject *obj, PyObject *name)
{
    PyObject *v = PyObject_GetAttr(obj, name);
    if (v == NULL) {
        return -1;
    }
    int t = PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

/* 1: plain (p filled, its references held), 0: not, -1: an error set */
static int
plain_message(PyObject *m, PyObject *topic, int64_t max_body, Plain *p)
{
    PyObject *t = PyObject_GetAttr(m, s_topic);
    if (t == NULL) {
        return -1;
    }
    int same = PyUnicode_CheckExact(t) && PyUnicode_Compare(t, topic) == 0;
    Py_DECREF(t);
    if (!same) {
        return PyErr_Occurred() ? -1 : 0;
    }
    PyObject *const names[] = {s_keys, s_properties, s_delay_level, s_flag};
    for (int k = 0; k < 4; k++) {
        int v = attr_true(m, names[k]);
        if (v != 0) {
            return v < 0 ? -1 : 0;
        }
    }
    p->body = PyObject_GetAttr(m, s_body);
    if (p->body == NULL) {
        return -1;
    }
    Py_ssize_t n = PyBytes_CheckExact(p->body) ? PyBytes_GET_SIZE(p->body) : 0;
    if (n <= 0 || n > max_body) {
        Py_CLEAR(p->body);
        return 0;
    }
    p->tags = PyObject_GetAttr(m, s_tags);
    if (p->tags == NULL) {
        Py_CLEAR(p->body);
        return -1;
    }
    p->tag = NULL;
    p->tag_len = 0;
    if (p->tags != Py_None) {
        if (!PyUnicode_Check(p->tags)) {
            goto not_plain;
        }
        if (PyUnicode_GET_LENGTH(p->tags) > 0) {
            p->tag = PyUnicode_AsUTF8AndSize(p->tags, &p->tag_len);
            if (p->tag == NULL) { /* a lone surrogate: the per-message path says so */
                PyErr_Clear();
                goto not_plain;
            }
            if (memchr(p->tag, 1, (size_t)p->tag_len) || memchr(p->tag, 2, (size_t)p->tag_len)) {
                goto not_plain;
            }
        }
    }
    return 1;
not_plain:
    Py_CLEAR(p->body);
    Py_CLEAR(p->tags);
    return 0;
}

static PyObject *
k_encode_messages(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    int64_t first, max_body, topic_len;
    if (check_nargs(nargs, 6, "encode_messages") < 0 || arg_i64(args[3], "first", &first) < 0 ||
        arg_i64(args[4], "max_body", &max_body) < 0 ||
        arg_i64(args[5], "topic_len", &topic_len) < 0) {
        return NULL;
    }
    PyObject *topic = args[1], *head = args[2];
    if (!PyUnicode_Check(topic) || !PyBytes_Check(head) || PyBytes_GET_SIZE(head) != 28) {
        PyErr_SetString(PyExc_TypeError, "encode_messages: a str topic and a 28-byte head");
        return NULL;
    }
    /* a tuple of its own: reading an attribute may run code that changes a list */
    PyObject *seq = PySequence_Tuple(args[0]);
    if (seq == NULL) {
        return NULL;
    }
    Py_ssize_t n = PyTuple_GET_SIZE(seq), got = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq); /* a tuple's items */
    PyObject *result = NULL, *data = NULL, *sizes = NULL;
    Plain *ps = PyMem_Calloc((size_t)(n ? n : 1), sizeof(Plain));
    if (ps == NULL) {
        PyErr_NoMemory();
        goto out;
    }
    int64_t total = 0;
    const int64_t uniq_props = (int64_t)strlen(UNIQ_PREFIX) + 33;
    for (; got < n; got++) {
        int r = plain_message(items[got], topic, max_body, &ps[got]);
        if (r <= 0) {
            if (r == 0) {
                result = Py_NewRef(Py_None);
            }
            goto out;
        }
        int64_t props = uniq_props;
        if (ps[got].tag_len) {
            props += (int64_t)strlen(TAGS_PREFIX) + ps[got].tag_len + 1;
        }
        if (props > PROPS_MAX) {
            result = Py_NewRef(Py_None);
            got++; /* its references are released below */
            goto out;
        }
        total += 22 + PyBytes_GET_SIZE(ps[got].body) + props;
    }
    data = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)total);
    sizes = data ? PyList_New(n) : NULL;
    if (sizes == NULL) {
        goto out;
    }
    uint8_t *out = (uint8_t *)PyBytes_AS_STRING(data);
    const uint8_t *hd = (const uint8_t *)PyBytes_AS_STRING(head);
    int64_t pos = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        const uint8_t *body = (const uint8_t *)PyBytes_AS_STRING(ps[i].body);
        int64_t blen = PyBytes_GET_SIZE(ps[i].body), tlen = ps[i].tag_len;
        int64_t props = uniq_props + (tlen ? (int64_t)strlen(TAGS_PREFIX) + tlen + 1 : 0);
        PyObject *size = PyLong_FromLongLong(HEADER_SIZE + blen + 1 + topic_len + 2 + props);
        if (size == NULL) {
            goto out;
        }
        PyList_SET_ITEM(sizes, i, size);
        put_i32(out, pos, 22 + blen + props);
        put_i32(out, pos + 4, MESSAGE_MAGIC);
        put_i32(out, pos + 8, crc32_range(body, 0, blen, 0) & 0x7FFFFFFF);
        put_i32(out, pos + 12, 0);
        put_i32(out, pos + 16, blen);
        pos += 20;
        memcpy(out + pos, body, (size_t)blen);
        pos += blen;
        out[pos] = (uint8_t)(props >> 8);
        out[pos + 1] = (uint8_t)props;
        pos += 2;
        if (tlen) {
            memcpy(out + pos, TAGS_PREFIX, strlen(TAGS_PREFIX));
            pos += (int64_t)strlen(TAGS_PREFIX);
            memcpy(out + pos, ps[i].tag, (size_t)tlen);
            pos += tlen;
            out[pos++] = 2;
        }
        memcpy(out + pos, UNIQ_PREFIX, strlen(UNIQ_PREFIX));
        pos += (int64_t)strlen(UNIQ_PREFIX);
        memcpy(out + pos, hd, 28);
        int64_t v = (first + i) & 0xFFFF;
        for (int d = 0; d < 4; d++) {
            out[pos + 28 + d] = (uint8_t)HEXD[(v >> (12 - 4 * d)) & 15];
        }
        out[pos + 32] = 2;
        pos += 33;
    }
    result = PyTuple_Pack(2, data, sizes);
out:
    for (Py_ssize_t i = 0; i < got && ps != NULL; i++) {
        Py_XDECREF(ps[i].body);
        Py_XDECREF(ps[i].tags);
    }
    PyMem_Free(ps);
    Py_XDECREF(data);
    Py_XDECREF(sizes);
    Py_DECREF(seq);
    return result;
}

#define METHOD(name, fn) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL, NULL}

static PyMethodDef methods[] = {
    METHOD("configure", kernels_configure),
    METHOD("crc32", kernels_crc32),
    METHOD("walk", k_walk),
    METHOD("gather", k_gather),
    METHOD("rows", k_rows),
    METHOD("split_props", k_split_props),
    METHOD("fields", k_fields),
    METHOD("check_bodies", k_check_bodies),
    METHOD("offset_ids", k_offset_ids),
    METHOD("encode_plain", k_encode_plain),
    METHOD("encode_messages", k_encode_messages),
    METHOD("fill", k_fill),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "connector.protocol._kernels",
    "The client's compiled kernels (connector/protocol/native.py chooses them).", -1, methods,
};

PyMODINIT_FUNC
PyInit__kernels(void)
{
    crc_init();
    s_topic = PyUnicode_InternFromString("topic");
    s_keys = PyUnicode_InternFromString("_keys");
    s_properties = PyUnicode_InternFromString("properties");
    s_delay_level = PyUnicode_InternFromString("delay_level");
    s_flag = PyUnicode_InternFromString("flag");
    s_body = PyUnicode_InternFromString("body");
    s_tags = PyUnicode_InternFromString("tags");
    if (!s_topic || !s_keys || !s_properties || !s_delay_level || !s_flag || !s_body || !s_tags) {
        return NULL;
    }
    return PyModule_Create(&module_def);
}
