/* broker.store._kernels: the store's per-message loops, compiled when pymq is built.
 *
 * broker/store/kernels.py says what each computes and is the only importer;
 * broker/store/_kernels_py.py is the same in plain Python (used without a C
 * compiler, and by the tests as the reference). Arrays are native-endian int64 / uint8;
 * file fields are big-endian. Every index into a buffer is checked (see
 * connector/protocol/_kernels_common.h): a corrupted or truncated segment yields a
 * status, never a read outside the mapping.
 */
#include "_kernels_common.h"

#define MESSAGE_MAGIC 0xDAA320A7
#define BLANK_MAGIC 0xCBD43194
#define ENTRY_HEAD 20     /* TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN */
#define ENTRY_OVERHEAD 22 /* + PROPLEN */
#define RECORD_FIXED 91   /* header through BODYLEN, TOPICLEN, PROPLEN */

static uint8_t topic_bytes[256]; /* the bytes a topic name may hold (set_topic_bytes) */

#define FAIL_SMALL(what)                                                                    \
    do {                                                                                    \
        small = (what);                                                                     \
        goto done;                                                                          \
    } while (0)

static PyObject *
too_small(const char *what)
{
    PyErr_Format(PyExc_ValueError, "%s: out of bounds", what);
    return NULL;
}

/* set_topic_bytes(table): 256 bytes, nonzero where a topic name may hold that byte */
static PyObject *
k_set_topic_bytes(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t n;
    if (check_nargs(nargs, 1, "set_topic_bytes") < 0) {
        return NULL;
    }
    const uint8_t *t = bufs_get(&b, args[0], "table", 1, K_U8, 0, 0, 0, &n);
    if (t == NULL || n != 256) {
        bufs_release(&b);
        return t == NULL ? NULL : too_small("table must have 256 entries");
    }
    memcpy(topic_bytes, t, 256);
    bufs_release(&b);
    Py_RETURN_NONE;
}

/* scan_batch(buf, max_body, max_count, prefix, starts, body_lens, props_lens, flags,
 *            crcs, tags_codes, key_hashes, key_msgs) -> (status, entries, keys, delayed) */
static PyObject *
k_scan_batch(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t end, cap = PY_SSIZE_T_MAX, kcap = PY_SSIZE_T_MAX, len;
    int64_t max_body, max_count, prefix;
    int64_t *cols[6], *keys[2];
    const char *small = NULL;
    if (check_nargs(nargs, 12, "scan_batch") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &end);
    if (buf == NULL || arg_i64(args[1], "max_body", &max_body) < 0 ||
        arg_i64(args[2], "max_count", &max_count) < 0 || arg_i64(args[3], "prefix", &prefix) < 0) {
        goto fail;
    }
    for (int i = 0; i < 6; i++) {
        if ((cols[i] = bufs_get(&b, args[4 + i], "column", 8, K_I64, 1, 1, 0, &len)) == NULL) {
            goto fail;
        }
        cap = len < cap ? len : cap;
    }
    for (int i = 0; i < 2; i++) {
        if ((keys[i] = bufs_get(&b, args[10 + i], "keys", 8, K_I64, 1, 1, 0, &len)) == NULL) {
            goto fail;
        }
        kcap = len < kcap ? len : kcap;
    }
    int64_t status = 0, n = 0, nkeys = 0;
    int delayed = 0;
    K_BEGIN_RELEASE(end >= K_LONG_BYTES)
    int64_t pos = 0;
    if (end == 0) {
        status = 10;
        goto done;
    }
    while (pos < end) {
        if (n >= max_count || n >= cap) {
            status = 9;
            break;
        }
        if (end - pos < ENTRY_OVERHEAD) {
            status = 1;
            break;
        }
        int64_t total = get_i32(buf, pos);
        int64_t magic = get_u32(buf, pos + 4);
        if (magic != MESSAGE_MAGIC && magic != 0) { /* 0: a RocketMQ client's (no CRC) */
            status = 2;
            break;
        }
        if (total < ENTRY_OVERHEAD || total > end - pos) {
            status = 3;
            break;
        }
        int64_t body_len = get_i32(buf, pos + 16);
        if (body_len <= 0) {
            status = 4;
            break;
        }
        if (body_len > max_body) {
            status = 5;
            break;
        }
        int64_t body_end = pos + ENTRY_HEAD + body_len;
        if (body_end + 2 > pos + total) {
            status = 6;
            break;
        }
        int64_t props_len = ((int64_t)buf[body_end] << 8) | buf[body_end + 1];
        if ((props_len & 0x8000) || body_end + 2 + props_len != pos + total) {
            status = 7;
            break;
        }
        int64_t crc = crc32_range(buf, pos + ENTRY_HEAD, body_end, 0) & 0x7FFFFFFF;
        if (magic != 0 && crc != get_i32(buf, pos + 8)) {
            status = 8;
            break;
        }
        cols[0][n] = pos;
        cols[1][n] = body_len;
        cols[2][n] = props_len;
        cols[3][n] = get_i32(buf, pos + 12);
        cols[4][n] = crc;
        Props pr = scan_props(buf, body_end + 2, pos + total, prefix, n, keys[0], keys[1], 1,
                              nkeys, kcap);
        if (pr.overflow) {
            small = "key arrays";
            break;
        }
        cols[5][n] = pr.tags_code;
        nkeys = pr.nkeys;
        if (!pr.ok) {
            status = 11;
            break;
        }
        delayed |= pr.delay;
        n++;
        pos += total;
    }
done:
    K_END_RELEASE()
    bufs_release(&b);
    if (small) {
        return too_small(small);
    }
    if (status) {
        delayed = 0;
    }
    return Py_BuildValue("LLLO", (long long)status, (long long)n, (long long)nkeys,
                         delayed ? Py_True : Py_False);
fail:
    bufs_release(&b);
    return NULL;
}

/* encode_batch_records(src, starts, body_lens, props_lens, flags, crcs, tags_codes, first,
 *     count, rel, dst, template, topic, first_queue_offset, phys_base, out_offsets,
 *     out_sizes, cq_out) -> None */
static PyObject *
k_encode_batch_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t src_n, dst_n, tpl_n, tlen, cq_n, len, cap = PY_SSIZE_T_MAX;
    Py_ssize_t rel_n, out_n = PY_SSIZE_T_MAX;
    int64_t first, count, first_qo, phys_base;
    int64_t *cols[6], *rel, *outs[2];
    const char *small = NULL;
    if (check_nargs(nargs, 18, "encode_batch_records") < 0) {
        return NULL;
    }
    const uint8_t *src = bufs_get(&b, args[0], "src", 1, K_U8, 0, 0, 0, &src_n);
    if (src == NULL) {
        goto fail;
    }
    for (int i = 0; i < 6; i++) {
        if ((cols[i] = bufs_get(&b, args[1 + i], "column", 8, K_I64, 0, 1, 0, &len)) == NULL) {
            goto fail;
        }
        cap = len < cap ? len : cap;
    }
    if (arg_i64(args[7], "first", &first) < 0 || arg_i64(args[8], "count", &count) < 0 ||
        (rel = bufs_get(&b, args[9], "rel", 8, K_I64, 0, 1, 0, &rel_n)) == NULL) {
        goto fail;
    }
    uint8_t *dst = bufs_get(&b, args[10], "dst", 1, K_U8, 1, 0, 0, &dst_n);
    const uint8_t *tpl = dst ? bufs_get(&b, args[11], "template", 1, K_U8, 0, 0, 0, &tpl_n) : 0;
    const uint8_t *topic = tpl ? bufs_get(&b, args[12], "topic", 1, K_U8, 0, 0, 0, &tlen) : 0;
    if (topic == NULL || arg_i64(args[13], "first_queue_offset", &first_qo) < 0 ||
        arg_i64(args[14], "phys_base", &phys_base) < 0) {
        goto fail;
    }
    for (int i = 0; i < 2; i++) {
        if ((outs[i] = bufs_get(&b, args[15 + i], "out", 8, K_I64, 1, 1, 0, &len)) == NULL) {
            goto fail;
        }
        out_n = len < out_n ? len : out_n;
    }
    uint8_t *cq = bufs_get(&b, args[17], "cq_out", 1, K_U8, 1, 0, 0, &cq_n);
    if (cq == NULL) {
        goto fail;
    }
    if (tpl_n < 88 || tlen > 255 || first < 0 || count < 0 || first + count > cap ||
        first + count > rel_n || first + count > out_n || count * 20 > cq_n) {
        bufs_release(&b);
        return too_small("encode_batch_records: arrays");
    }
    K_BEGIN_RELEASE(count >= K_LONG_ITEMS)
    for (int64_t i = 0; i < count; i++) {
        int64_t j = first + i;
        int64_t p = rel[j], blen = cols[1][j], plen = cols[2][j], s = cols[0][j] + ENTRY_HEAD;
        int64_t size = RECORD_FIXED + tlen + blen + plen;
        if (p < 0 || blen < 0 || plen < 0 || p + size > dst_n || s < ENTRY_HEAD ||
            s + blen + 2 + plen > src_n) {
            FAIL_SMALL("encode_batch_records: record");
        }
        int64_t phys = phys_base + p;
        memcpy(dst + p, tpl, 88);
        put_i32(dst, p, size);
        put_i32(dst, p + 8, cols[4][j]);
        put_i32(dst, p + 16, cols[3][j]);
        put_i64(dst, p + 20, first_qo + i);
        put_i64(dst, p + 28, phys);
        put_i32(dst, p + 84, blen);
        memcpy(dst + p + 88, src + s, (size_t)blen);
        int64_t q = p + 88 + blen;
        dst[q] = (uint8_t)tlen;
        memcpy(dst + q + 1, topic, (size_t)tlen);
        q += 1 + tlen;
        memcpy(dst + q, src + s + blen, (size_t)(2 + plen)); /* PROPLEN and properties */
        int64_t c = i * 20;
        put_i64(cq, c, phys);
        put_i32(cq, c + 8, size);
        put_i64(cq, c + 12, cols[5][j]);
        outs[0][j] = phys;
        outs[1][j] = size;
    }
done:
    K_END_RELEASE()
    bufs_release(&b);
    if (small) {
        return too_small(small);
    }
    Py_RETURN_NONE;
fail:
    bufs_release(&b);
    return NULL;
}

/* columns of encode_single_records' tables (broker/store/kernels.py names them) */
enum { S_QUEUE_ID, S_FLAG, S_SYS_FLAG, S_BORN_TS, S_RECONSUME, S_TAGS_CODE, S_BORN_HOST,
       S_BODY_LEN, S_PROPS_LEN, S_TOPIC, S_SLOT, SINGLE_COLUMNS };
enum { T_START, T_LEN, T_KEY_PREFIX };
enum { O_OFFSET, O_SIZE, O_QUEUE_OFFSET };
enum { Q_BASE, Q_COUNT, Q_FIRST_ROW };

/* encode_single_records(src, table, topics, slots, first, dst, pos, limit, phys_base,
 *     store_timestamp, store_host, out, cq_out, key_hashes, nkeys)
 *     -> (next message, next position, key count). Holds the GIL (see kernels.py). */
static PyObject *
k_encode_single_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t src_n, table_n, topics_n, slots_n, dst_n, out_n, cq_n, keys_n;
    int64_t first, pos, limit, phys_base, store_ts, store_host, nkeys;
    int64_t *rank = NULL, j = 0;
    const char *small = NULL;
    if (check_nargs(nargs, 15, "encode_single_records") < 0) {
        return NULL;
    }
    const uint8_t *src = bufs_get(&b, args[0], "src", 1, K_U8, 0, 0, 0, &src_n);
    const int64_t *table =
        src ? bufs_get(&b, args[1], "table", 8, K_I64, 0, 2, SINGLE_COLUMNS, &table_n) : 0;
    const int64_t *topics = table ? bufs_get(&b, args[2], "topics", 8, K_I64, 0, 2, 3, &topics_n) : 0;
    int64_t *slots = topics ? bufs_get(&b, args[3], "slots", 8, K_I64, 1, 2, 3, &slots_n) : 0;
    if (slots == NULL || arg_i64(args[4], "first", &first) < 0) {
        goto fail;
    }
    uint8_t *dst = bufs_get(&b, args[5], "dst", 1, K_U8, 1, 0, 0, &dst_n);
    if (dst == NULL || arg_i64(args[6], "pos", &pos) < 0 || arg_i64(args[7], "limit", &limit) < 0 ||
        arg_i64(args[8], "phys_base", &phys_base) < 0 ||
        arg_i64(args[9], "store_timestamp", &store_ts) < 0 ||
        arg_i64(args[10], "store_host", &store_host) < 0) {
        goto fail;
    }
    int64_t *out = bufs_get(&b, args[11], "out", 8, K_I64, 1, 2, 3, &out_n);
    uint8_t *cq = out ? bufs_get(&b, args[12], "cq_out", 1, K_U8, 1, 0, 0, &cq_n) : 0;
    int64_t *keys = cq ? bufs_get(&b, args[13], "key_hashes", 8, K_I64, 1, 2, 2, &keys_n) : 0;
    if (keys == NULL || arg_i64(args[14], "nkeys", &nkeys) < 0) {
        goto fail;
    }
    int64_t n = table_n / SINGLE_COLUMNS, nslots = slots_n / 3, ntopics = topics_n / 3;
    int64_t key_cap = keys_n / 2;
    if (limit > dst_n) {
        limit = dst_n;
    }
    if (out_n / 3 < n || cq_n < n * 20 || first < 0 || first > n || pos < 0 || nkeys < 0 ||
        nkeys > key_cap) {
        bufs_release(&b);
        return too_small("encode_single_records: arrays");
    }
    rank = PyMem_Calloc((size_t)(nslots ? nslots : 1), sizeof(int64_t));
    if (rank == NULL) {
        bufs_release(&b);
        return PyErr_NoMemory();
    }
    int64_t body_at = 0, props_at = 0, row = 0;
    for (j = 0; j < n; j++) {
        const int64_t *m = table + j * SINGLE_COLUMNS;
        int64_t q = m[S_SLOT], t = m[S_TOPIC];
        if (q < 0 || q >= nslots || t < 0 || t >= ntopics || m[S_BODY_LEN] < 0 ||
            m[S_PROPS_LEN] < 0 || m[S_PROPS_LEN] > 0x7FFF) {
            FAIL_SMALL("encode_single_records: table");
        }
        props_at += m[S_BODY_LEN];
        rank[q]++;
    }
    for (int64_t q = 0; q < nslots; q++) {
        slots[q * 3 + Q_COUNT] = rank[q];
        slots[q * 3 + Q_FIRST_ROW] = row;
        row += rank[q];
        rank[q] = 0;
    }
    for (j = 0; j < first; j++) { /* where message ``first`` starts, its ranks */
        const int64_t *m = table + j * SINGLE_COLUMNS;
        body_at += m[S_BODY_LEN];
        props_at += m[S_PROPS_LEN];
        rank[m[S_SLOT]]++;
    }
    for (j = first; j < n; j++) {
        const int64_t *m = table + j * SINGLE_COLUMNS;
        int64_t blen = m[S_BODY_LEN], plen = m[S_PROPS_LEN], t = m[S_TOPIC];
        int64_t tstart = topics[t * 3 + T_START], tlen = topics[t * 3 + T_LEN];
        if (tlen < 0 || tlen > 255 || tstart < 0 || tstart + tlen > src_n ||
            body_at + blen > src_n || props_at + plen > src_n) {
            FAIL_SMALL("encode_single_records: src");
        }
        int64_t size = RECORD_FIXED + tlen + blen + plen;
        if (pos + size > limit) {
            break;
        }
        int64_t q = m[S_SLOT];
        int64_t queue_offset = slots[q * 3 + Q_BASE] + rank[q];
        int64_t c = (slots[q * 3 + Q_FIRST_ROW] + rank[q]) * 20;
        rank[q]++;
        int64_t p = pos, phys = phys_base + p;
        put_i32(dst, p, size);
        put_i32(dst, p + 4, MESSAGE_MAGIC);
        put_i32(dst, p + 8, crc32_range(src, body_at, body_at + blen, 0) & 0x7FFFFFFF);
        put_i32(dst, p + 12, m[S_QUEUE_ID]);
        put_i32(dst, p + 16, m[S_FLAG]);
        put_i64(dst, p + 20, queue_offset);
        put_i64(dst, p + 28, phys);
        put_i32(dst, p + 36, m[S_SYS_FLAG]);
        put_i64(dst, p + 40, m[S_BORN_TS]);
        put_i64(dst, p + 48, m[S_BORN_HOST]);
        put_i64(dst, p + 56, store_ts);
        put_i64(dst, p + 64, store_host);
        put_i32(dst, p + 72, m[S_RECONSUME]);
        put_i64(dst, p + 76, 0);
        put_i32(dst, p + 84, blen);
        memcpy(dst + p + 88, src + body_at, (size_t)blen);
        int64_t e = p + 88 + blen;
        dst[e] = (uint8_t)tlen;
        memcpy(dst + e + 1, src + tstart, (size_t)tlen);
        e += 1 + tlen;
        dst[e] = (uint8_t)(plen >> 8);
        dst[e + 1] = (uint8_t)plen;
        memcpy(dst + e + 2, src + props_at, (size_t)plen);
        put_i64(cq, c, phys);
        put_i32(cq, c + 8, size);
        put_i64(cq, c + 12, m[S_TAGS_CODE]);
        out[j * 3 + O_OFFSET] = phys;
        out[j * 3 + O_SIZE] = size;
        out[j * 3 + O_QUEUE_OFFSET] = queue_offset;
        Props pr = scan_props(src, props_at, props_at + plen, topics[t * 3 + T_KEY_PREFIX], j,
                              keys, keys + 1, 2, nkeys, key_cap);
        if (pr.overflow) {
            FAIL_SMALL("encode_single_records: key_hashes");
        }
        nkeys = pr.nkeys;
        body_at += blen;
        props_at += plen;
        pos += size;
    }
done:
    PyMem_Free(rank);
    bufs_release(&b);
    if (small) {
        return too_small(small);
    }
    return Py_BuildValue("LLL", (long long)j, (long long)pos, (long long)nkeys);
fail:
    bufs_release(&b);
    return NULL;
}

/* index_insert(buf, slot_num, count, slot_count, hashes, offsets, time_diffs)
 *     -> (count, slots used) */
static PyObject *
k_index_insert(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t buf_n, nh, no, nd;
    int64_t slot_num, count, slot_count;
    const char *small = NULL;
    if (check_nargs(nargs, 7, "index_insert") < 0) {
        return NULL;
    }
    uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 1, 0, 0, &buf_n);
    if (buf == NULL || arg_i64(args[1], "slot_num", &slot_num) < 0 ||
        arg_i64(args[2], "count", &count) < 0 || arg_i64(args[3], "slot_count", &slot_count) < 0) {
        goto fail;
    }
    const int64_t *h = bufs_get(&b, args[4], "hashes", 8, K_I64, 0, 1, 0, &nh);
    const int64_t *o = h ? bufs_get(&b, args[5], "offsets", 8, K_I64, 0, 1, 0, &no) : 0;
    const int64_t *d = o ? bufs_get(&b, args[6], "time_diffs", 8, K_I64, 0, 1, 0, &nd) : 0;
    if (d == NULL) {
        goto fail;
    }
    if (slot_num <= 0 || no < nh || nd < nh || count < 0 || 40 + slot_num * 4 > buf_n) {
        bufs_release(&b);
        return too_small("index_insert: arguments");
    }
    K_BEGIN_RELEASE(nh >= K_LONG_ITEMS)
    int64_t entries_at = 40 + slot_num * 4;
    for (Py_ssize_t j = 0; j < nh; j++) {
        int64_t hv = h[j];
        int64_t spos = 40 + (int64_t)((uint64_t)hv % (uint64_t)slot_num) * 4;
        int64_t e = entries_at + count * 20;
        if (e + 20 > buf_n) {
            FAIL_SMALL("index_insert: index file full");
        }
        int64_t prev = get_i32(buf, spos);
        if (prev <= 0 || prev >= count) {
            if (prev == 0) {
                slot_count++;
            }
            prev = 0; /* empty, or left pointing at an unwritten entry by a crash */
        }
        put_i32(buf, e, hv);
        put_i64(buf, e + 4, o[j]);
        put_i32(buf, e + 12, d[j]);
        put_i32(buf, e + 16, prev);
        put_i32(buf, spos, count);
        count++;
    }
done:
    K_END_RELEASE()
    bufs_release(&b);
    if (small) {
        return too_small(small);
    }
    return Py_BuildValue("LL", (long long)count, (long long)slot_count);
fail:
    bufs_release(&b);
    return NULL;
}

/* check_records(data, starts, sizes, body_starts, body_ends) -> -1 or the first bad index */
static PyObject *
k_check_records(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t n, ns, nz, nb, ne;
    if (check_nargs(nargs, 5, "check_records") < 0) {
        return NULL;
    }
    const uint8_t *data = bufs_get(&b, args[0], "data", 1, K_U8, 0, 0, 0, &n);
    const int64_t *st = data ? bufs_get(&b, args[1], "starts", 8, K_I64, 0, 1, 0, &ns) : 0;
    const int64_t *sz = st ? bufs_get(&b, args[2], "sizes", 8, K_I64, 0, 1, 0, &nz) : 0;
    int64_t *bs = sz ? bufs_get(&b, args[3], "body_starts", 8, K_I64, 1, 1, 0, &nb) : 0;
    int64_t *be = bs ? bufs_get(&b, args[4], "body_ends", 8, K_I64, 1, 1, 0, &ne) : 0;
    if (be == NULL) {
        bufs_release(&b);
        return NULL;
    }
    if (nz < ns || nb < ns || ne < ns) {
        bufs_release(&b);
        return too_small("check_records: arrays");
    }
    int64_t bad = -1;
    K_BEGIN_RELEASE(ns >= K_LONG_ITEMS)
    for (Py_ssize_t j = 0; j < ns; j++) {
        int64_t p = st[j], size = sz[j];
        /* under 91 bytes no body fits (the check below): rejected before any read */
        if (p < 0 || size < RECORD_FIXED || p + size > n || get_i32(data, p) != size ||
            get_u32(data, p + 4) != MESSAGE_MAGIC) {
            bad = j;
            break;
        }
        int64_t blen = get_i32(data, p + 84);
        if (blen < 0 || 88 + blen + 3 > size) {
            bad = j;
            break;
        }
        bs[j] = p + 88;
        be[j] = p + 88 + blen;
    }
    K_END_RELEASE()
    bufs_release(&b);
    return PyLong_FromLongLong(bad);
}

#define LOG_CHUNK_FULL 0
#define LOG_SEGMENT_END 1
#define LOG_END_OF_DATA 2

/* scan_log(buf, pos, base, check_crc, offsets, sizes, queue_ids, queue_offsets, store_ts,
 *     topic_pos, topic_lens, topic_crcs, tags_codes, key_hashes, key_recs)
 *     -> (status, records, next_pos, keys) */
static PyObject *
k_scan_log(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t limit, len, cap = PY_SSIZE_T_MAX, kcap = PY_SSIZE_T_MAX;
    int64_t pos, base, check_crc;
    int64_t *c[9], *keys[2];
    if (check_nargs(nargs, 15, "scan_log") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &limit);
    if (buf == NULL || arg_i64(args[1], "pos", &pos) < 0 || arg_i64(args[2], "base", &base) < 0) {
        goto fail;
    }
    check_crc = PyObject_IsTrue(args[3]);
    if (check_crc < 0) {
        goto fail;
    }
    for (int i = 0; i < 9; i++) {
        if ((c[i] = bufs_get(&b, args[4 + i], "column", 8, K_I64, 1, 1, 0, &len)) == NULL) {
            goto fail;
        }
        cap = len < cap ? len : cap;
    }
    for (int i = 0; i < 2; i++) {
        if ((keys[i] = bufs_get(&b, args[13 + i], "keys", 8, K_I64, 1, 1, 0, &len)) == NULL) {
            goto fail;
        }
        kcap = len < kcap ? len : kcap;
    }
    if (pos < 0) {
        bufs_release(&b);
        return too_small("scan_log: pos");
    }
    int64_t status = LOG_SEGMENT_END, n = 0, nkeys = 0;
    K_BEGIN_RELEASE(limit - pos >= K_LONG_BYTES)
    for (;;) {
        if (pos >= limit) {
            status = LOG_SEGMENT_END;
            break;
        }
        if (n >= cap) {
            status = LOG_CHUNK_FULL;
            break;
        }
        if (limit - pos < 8) {
            status = 3;
            break;
        }
        int64_t total = get_i32(buf, pos), magic = get_u32(buf, pos + 4);
        if (total == 0 && magic == 0) {
            status = LOG_END_OF_DATA;
            break;
        }
        if (magic == BLANK_MAGIC) {
            if (total != limit - pos) {
                status = 11;
                break;
            }
            status = LOG_SEGMENT_END;
            pos = limit;
            break;
        }
        if (magic != MESSAGE_MAGIC) {
            status = 4;
            break;
        }
        if (total < RECORD_FIXED || total > limit - pos) {
            status = 5;
            break;
        }
        if (get_i64(buf, pos + 28) != base + pos) {
            status = 6;
            break;
        }
        int64_t body_len = get_i32(buf, pos + 84);
        if (body_len < 0 || 88 + body_len + 3 > total) {
            status = 7;
            break;
        }
        int64_t tp = pos + 88 + body_len, tl = buf[tp];
        if (tl > 127 || tp + 1 + tl + 2 > pos + total) {
            status = 8;
            break;
        }
        int64_t pp = tp + 1 + tl;
        int64_t plen = ((int64_t)buf[pp] << 8) | buf[pp + 1];
        if ((plen & 0x8000) || pp + 2 + plen != pos + total) {
            status = 9;
            break;
        }
        if (nkeys + plen / 2 + 1 > kcap) {
            status = LOG_CHUNK_FULL; /* no room for every key this record may have */
            break;
        }
        if (check_crc &&
            (crc32_range(buf, pos + 88, tp, 0) & 0x7FFFFFFF) != get_i32(buf, pos + 8)) {
            status = 10;
            break;
        }
        int topic_ok = tl > 0;
        for (int64_t i = tp + 1; topic_ok && i < pp; i++) {
            topic_ok = topic_bytes[buf[i]] != 0;
        }
        if (!topic_ok) {
            status = 12;
            break;
        }
        int64_t tcrc = crc32_range(buf, tp + 1, pp, 0);
        static const uint8_t hash_sign = '#';
        int64_t prefix = crc32_range(&hash_sign, 0, 1, tcrc); /* the index key prefix */
        c[0][n] = base + pos;
        c[1][n] = total;
        c[2][n] = get_i32(buf, pos + 12);
        c[3][n] = get_i64(buf, pos + 20);
        c[4][n] = get_i64(buf, pos + 56);
        c[5][n] = tp + 1;
        c[6][n] = tl;
        c[7][n] = tcrc;
        /* the body CRC does not cover topic and properties: their checks catch a record
         * whose end was never written (zeros where a name or the last \x02 must be) */
        Props pr = scan_props(buf, pp + 2, pos + total, prefix, n, keys[0], keys[1], 1, nkeys,
                              kcap);
        c[8][n] = pr.tags_code;
        if (!pr.ok) { /* no overflow: room was checked above */
            status = 13;
            break;
        }
        nkeys = pr.nkeys;
        n++;
        pos += total;
    }
    K_END_RELEASE()
    bufs_release(&b);
    return Py_BuildValue("LLLL", (long long)status, (long long)n, (long long)pos,
                         (long long)nkeys);
fail:
    bufs_release(&b);
    return NULL;
}

/* group_queues(buf, n, topic_pos, topic_lens, topic_crcs, queue_ids, queue_offsets,
 *              offsets, sizes, tags_codes, groups, entries) -> groups found, or -1
 * The first n records of scan_log's columns (topic_pos inside buf) by queue: a group is
 * one topic (same bytes) and queue id, its records in log order. groups is int64
 * [cap, 4], one row a group in order of first appearance: (first record, records,
 * first queue offset, 1 if its queue offsets rise by one record to the next else 0);
 * entries (n * 20 bytes) gets each group's ConsumeQueue entries (offset, size, tags
 * code, big-endian) one group after another. -1: more groups than cap rows. */
#define GROUP_SLOTS_MIN 64

static PyObject *
k_group_queues(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t limit, len, cap, ne, col = PY_SSIZE_T_MAX;
    int64_t n;
    const int64_t *c[8];
    int32_t *ids = NULL, *slots = NULL;
    int64_t *next_q = NULL;
    if (check_nargs(nargs, 12, "group_queues") < 0) {
        return NULL;
    }
    const uint8_t *buf = bufs_get(&b, args[0], "buf", 1, K_U8, 0, 0, 0, &limit);
    if (buf == NULL || arg_i64(args[1], "n", &n) < 0) {
        goto fail;
    }
    for (int i = 0; i < 8; i++) {
        if ((c[i] = bufs_get(&b, args[2 + i], "column", 8, K_I64, 0, 1, 0, &len)) == NULL) {
            goto fail;
        }
        col = len < col ? len : col;
    }
    int64_t *groups = bufs_get(&b, args[10], "groups", 8, K_I64, 1, 2, 4, &len);
    uint8_t *entries = groups ? bufs_get(&b, args[11], "entries", 1, K_U8, 1, 0, 0, &ne) : 0;
    if (entries == NULL) {
        goto fail;
    }
    cap = len / 4;
    if (n < 0 || n > col || ne < n * 20) {
        bufs_release(&b);
        return too_small("group_queues: n");
    }
    const int64_t *tpos = c[0], *tlen = c[1], *tcrc = c[2], *qid = c[3], *qoff = c[4];
    const int64_t *off = c[5], *size = c[6], *tags = c[7];
    for (int64_t i = 0; i < n; i++) {
        if (tpos[i] < 0 || tlen[i] < 0 || tpos[i] + tlen[i] > limit) {
            bufs_release(&b);
            return too_small("group_queues: topic_pos");
        }
    }
    Py_ssize_t nslots = GROUP_SLOTS_MIN;
    while (nslots < 2 * cap) {
        nslots *= 2;
    }
    ids = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(int32_t));
    slots = PyMem_Malloc((size_t)nslots * sizeof(int32_t));
    next_q = PyMem_Malloc((size_t)(cap ? cap : 1) * sizeof(int64_t));
    if (ids == NULL || slots == NULL || next_q == NULL) {
        PyErr_NoMemory();
        goto fail;
    }
    memset(slots, 0xff, (size_t)nslots * sizeof(int32_t)); /* -1: empty */
    int64_t g = 0, last = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t found = -1;
        if (last >= 0) { /* runs of one queue are the usual shape (a batch) */
            int64_t f = groups[last * 4];
            if (tcrc[f] == tcrc[i] && qid[f] == qid[i] && tlen[f] == tlen[i] &&
                memcmp(buf + tpos[f], buf + tpos[i], (size_t)tlen[i]) == 0) {
                found = last;
            }
        }
        if (found < 0) {
            uint64_t h = ((uint64_t)tcrc[i] * 0x9E3779B97F4A7C15ULL) ^ (uint64_t)qid[i];
            Py_ssize_t s = (Py_ssize_t)((h ^ (h >> 29)) & (uint64_t)(nslots - 1));
            for (;; s = (s + 1) & (nslots - 1)) {
                int32_t k = slots[s];
                if (k < 0) {
                    if (g >= cap) {
                        g = -1;
                        goto done;
                    }
                    slots[s] = (int32_t)g;
                    groups[g * 4] = i;
                    groups[g * 4 + 1] = 0;
                    groups[g * 4 + 2] = qoff[i];
                    groups[g * 4 + 3] = 1;
                    next_q[g] = qoff[i];
                    found = g++;
                    break;
                }
                int64_t f = groups[k * 4];
                if (tcrc[f] == tcrc[i] && qid[f] == qid[i] && tlen[f] == tlen[i] &&
                    memcmp(buf + tpos[f], buf + tpos[i], (size_t)tlen[i]) == 0) {
                    found = k;
                    break;
                }
            }
        }
        if (qoff[i] != next_q[found]) {
            groups[found * 4 + 3] = 0;
        }
        next_q[found] = qoff[i] + 1;
        groups[found * 4 + 1]++;
        ids[i] = (int32_t)found;
        last = found;
    }
    /* where each group's entries start, then the entries (next_q reused as cursors) */
    for (int64_t k = 0, at = 0; k < g; k++) {
        next_q[k] = at;
        at += groups[k * 4 + 1];
    }
    for (int64_t i = 0; i < n; i++) {
        int64_t e = next_q[ids[i]]++ * 20;
        put_i64(entries, e, off[i]);
        put_i32(entries, e + 8, size[i]);
        put_i64(entries, e + 12, tags[i]);
    }
done:
    PyMem_Free(ids);
    PyMem_Free(slots);
    PyMem_Free(next_q);
    bufs_release(&b);
    return PyLong_FromLongLong((long long)g);
fail:
    PyMem_Free(ids);
    PyMem_Free(slots);
    PyMem_Free(next_q);
    bufs_release(&b);
    return NULL;
}

static PyMethodDef methods[] = {
    {"configure", (PyCFunction)(void (*)(void))kernels_configure, METH_FASTCALL, NULL},
    {"crc32", (PyCFunction)(void (*)(void))kernels_crc32, METH_FASTCALL, NULL},
    {"set_topic_bytes", (PyCFunction)(void (*)(void))k_set_topic_bytes, METH_FASTCALL, NULL},
    {"scan_batch", (PyCFunction)(void (*)(void))k_scan_batch, METH_FASTCALL, NULL},
    {"encode_batch_records", (PyCFunction)(void (*)(void))k_encode_batch_records, METH_FASTCALL,
     NULL},
    {"encode_single_records", (PyCFunction)(void (*)(void))k_encode_single_records,
     METH_FASTCALL, NULL},
    {"index_insert", (PyCFunction)(void (*)(void))k_index_insert, METH_FASTCALL, NULL},
    {"check_records", (PyCFunction)(void (*)(void))k_check_records, METH_FASTCALL, NULL},
    {"scan_log", (PyCFunction)(void (*)(void))k_scan_log, METH_FASTCALL, NULL},
    {"group_queues", (PyCFunction)(void (*)(void))k_group_queues, METH_FASTCALL, NULL},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "broker.store._kernels",
    "The store's compiled kernels (broker/store/kernels.py is the API).", -1, methods,
};

PyMODINIT_FUNC
PyInit__kernels(void)
{
    crc_init();
    return PyModule_Create(&module_def);
}
