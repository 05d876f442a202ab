/* What the two kernel modules share: argument buffers, big-endian fields, CRC-32,
 * Java's String.hashCode over UTF-8 and the property scan.
 *
 * Included by connector/protocol/_kernels.c (the client's and the Spark workers'
 * kernels) and broker/store/_kernels.c (the store's). Everything is static: each module
 * has its own copy, and its own long-CRC function (set by its Python wrapper through
 * ``configure``).
 *
 * Safety rule of every kernel: a read or write index is checked against its buffer's
 * length before use. Lengths that come from the data (a corrupted or truncated segment,
 * a hostile request) are compared with what is left of the buffer, never trusted; a
 * caller's arrays that are too small raise ValueError instead of being overrun.
 */
#ifndef PYMQ_KERNELS_COMMON_H
#define PYMQ_KERNELS_COMMON_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* -- the GIL around a loop ----------------------------------------------------------- */

/* A loop gives the GIL up only when it is long (K_LONG_BYTES of input or K_LONG_ITEMS
 * records): a thread that lets go of the GIL while another waits for it gets it back
 * only once that one blocks or its switch interval (5 ms by default) ends, far longer
 * than a short loop takes. A small batch or answer (the common request) keeps it. */
#define K_LONG_BYTES 65536
#define K_LONG_ITEMS 512
#define K_BEGIN_RELEASE(is_long)                                                            \
    {                                                                                       \
        PyThreadState *k_save_ = (is_long) ? PyEval_SaveThread() : NULL;
#define K_END_RELEASE()                                                                     \
    if (k_save_ != NULL) {                                                                  \
        PyEval_RestoreThread(k_save_);                                                      \
    }                                                                                       \
    }

/* -- argument buffers --------------------------------------------------------------- */

#define MAX_BUFS 24

typedef struct {
    Py_buffer views[MAX_BUFS];
    int n;
} Bufs;

/* item kinds: the buffer formats accepted for each */
#define K_U8 "Bb?c"  /* bytes, uint8, bool */
#define K_I64 "qlQL" /* int64 (numpy's 'l' on LP64, 'q' elsewhere) */
#define K_I32 "iI"

static void
bufs_release(Bufs *b)
{
    for (int i = 0; i < b->n; i++) {
        PyBuffer_Release(&b->views[i]);
    }
    b->n = 0;
}

/* The contiguous buffer of ``obj``: items of ``itemsize`` bytes whose format is one of
 * ``kinds``, writable if asked; ``ndim`` 0 accepts any shape, else it must match (and
 * ``cols`` > 0 the length of the last axis). Returns its data, its length in items in
 * *len; NULL with an exception set if ``obj`` does not qualify. */
static void *
bufs_get(Bufs *b, PyObject *obj, const char *name, Py_ssize_t itemsize, const char *kinds,
         int writable, int ndim, Py_ssize_t cols, Py_ssize_t *len)
{
    if (b->n >= MAX_BUFS) {
        PyErr_SetString(PyExc_SystemError, "too many buffers");
        return NULL;
    }
    Py_buffer *v = &b->views[b->n];
    int flags = PyBUF_C_CONTIGUOUS | PyBUF_FORMAT | (writable ? PyBUF_WRITABLE : 0);
    if (PyObject_GetBuffer(obj, v, flags) < 0) {
        PyErr_Format(PyExc_TypeError, "%s: a contiguous%s buffer is needed", name,
                     writable ? " writable" : "");
        return NULL;
    }
    b->n++;
    const char *fmt = v->format ? v->format : "B";
    while (*fmt == '<' || *fmt == '=' || *fmt == '@' || *fmt == '|') {
        fmt++;
    }
    if (v->itemsize != itemsize || fmt[0] == '\0' || fmt[1] != '\0' || !strchr(kinds, fmt[0])) {
        PyErr_Format(PyExc_TypeError, "%s: items of %zd bytes (%s) expected, got format %s", name,
                     itemsize, kinds, v->format ? v->format : "B");
        return NULL;
    }
    if (ndim && v->ndim != ndim) {
        PyErr_Format(PyExc_ValueError, "%s: %d dimensions expected, got %d", name, ndim, v->ndim);
        return NULL;
    }
    if (cols > 0 && (v->ndim < 1 || v->shape[v->ndim - 1] != cols)) {
        PyErr_Format(PyExc_ValueError, "%s: rows of %zd items expected", name, cols);
        return NULL;
    }
    *len = v->len / itemsize;
    return v->buf;
}

static int
arg_i64(PyObject *obj, const char *name, int64_t *out)
{
    long long v = PyLong_AsLongLong(obj);
    if (v == -1 && PyErr_Occurred()) {
        PyErr_Format(PyExc_TypeError, "%s: an int is needed", name);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

static int
check_nargs(Py_ssize_t nargs, Py_ssize_t want, const char *fn)
{
    if (nargs != want) {
        PyErr_Format(PyExc_TypeError, "%s takes %zd arguments (%zd given)", fn, want, nargs);
        return -1;
    }
    return 0;
}

/* -- big-endian (Java order) fields: the caller checks the bounds --------------------- */

/* one unaligned load or store and a byte swap: gcc does not merge the byte-by-byte form,
 * which made the pull-answer walk take twice numba's time a record */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BE32(x) __builtin_bswap32(x)
#define BE64(x) __builtin_bswap64(x)
#elif defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
#define BE32(x) (x)
#define BE64(x) (x)
#endif

#ifdef BE32
static inline int64_t
get_u32(const uint8_t *b, int64_t p)
{
    uint32_t v;
    memcpy(&v, b + p, 4);
    return (int64_t)BE32(v);
}

static inline int64_t
get_i64(const uint8_t *b, int64_t p)
{
    uint64_t v;
    memcpy(&v, b + p, 8);
    return (int64_t)BE64(v);
}

static inline void
put_i32(uint8_t *b, int64_t p, int64_t v)
{
    uint32_t x = BE32((uint32_t)v);
    memcpy(b + p, &x, 4);
}

static inline void
put_i64(uint8_t *b, int64_t p, int64_t v)
{
    uint64_t x = BE64((uint64_t)v);
    memcpy(b + p, &x, 8);
}
#else
static inline int64_t
get_u32(const uint8_t *b, int64_t p)
{
    return ((int64_t)b[p] << 24) | ((int64_t)b[p + 1] << 16) | ((int64_t)b[p + 2] << 8) |
           (int64_t)b[p + 3];
}

static inline int64_t
get_i64(const uint8_t *b, int64_t p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) {
        v = (v << 8) | b[p + k];
    }
    return (int64_t)v;
}

static inline void
put_i32(uint8_t *b, int64_t p, int64_t v)
{
    b[p] = (uint8_t)(v >> 24);
    b[p + 1] = (uint8_t)(v >> 16);
    b[p + 2] = (uint8_t)(v >> 8);
    b[p + 3] = (uint8_t)v;
}

static inline void
put_i64(uint8_t *b, int64_t p, int64_t v)
{
    for (int k = 0; k < 8; k++) {
        b[p + k] = (uint8_t)((uint64_t)v >> (56 - 8 * k));
    }
}
#endif

static inline int64_t
get_i32(const uint8_t *b, int64_t p)
{
    return (int64_t)(int32_t)(uint32_t)get_u32(b, p);
}

/* -- CRC-32 (zlib's: reflected 0xEDB88320) ------------------------------------------ */

/* A C crc32(crc, buf, len) for long pieces: zlib-ng's zng_crc32 (folds with carry-less
 * multiplies, ~20x the table loop on 16 KiB) or the C library zlib's crc32, found by the
 * Python wrapper (connector.protocol.native) and set through ``configure``. Only the
 * low 32 bits of its answer are kept: zng_crc32 returns a uint32_t. */
typedef uint64_t (*long_crc_fn)(uint64_t, const uint8_t *, uint32_t);
static long_crc_fn long_crc = NULL;
static int64_t long_crc_min = INT64_MAX; /* pieces this long or longer go to long_crc */

static uint32_t crc_table[8][256]; /* slice-by-8: row k advances by k more zero bytes */

static void
crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) {
            c = (c & 1) ? (c >> 1) ^ 0xEDB88320u : c >> 1;
        }
        crc_table[0][i] = c;
    }
    for (int k = 1; k < 8; k++) {
        for (int i = 0; i < 256; i++) {
            uint32_t prev = crc_table[k - 1][i];
            crc_table[k][i] = (prev >> 8) ^ crc_table[0][prev & 0xFF];
        }
    }
}

/* zlib.crc32(buf[start:end], crc): the bounds are the caller's to check */
static inline int64_t
crc32_range(const uint8_t *buf, int64_t start, int64_t end, int64_t crc)
{
    if (end <= start) {
        return crc & 0xFFFFFFFF;
    }
    if (long_crc != NULL && end - start >= long_crc_min) {
        uint64_t c = (uint64_t)(crc & 0xFFFFFFFF);
        const uint8_t *at = buf + start;
        int64_t left = end - start;
        while (left > 0) {
            uint32_t step = left > (1 << 30) ? (1u << 30) : (uint32_t)left;
            c = long_crc(c, at, step) & 0xFFFFFFFFu;
            at += step;
            left -= step;
        }
        return (int64_t)c;
    }
    uint32_t c = (uint32_t)crc ^ 0xFFFFFFFFu;
    const uint8_t *p = buf + start;
    int64_t n = end - start;
    while (n >= 8) {
        uint32_t one = c ^ ((uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) |
                            ((uint32_t)p[3] << 24));
        c = crc_table[7][one & 0xFF] ^ crc_table[6][(one >> 8) & 0xFF] ^
            crc_table[5][(one >> 16) & 0xFF] ^ crc_table[4][one >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n-- > 0) {
        c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    }
    return (int64_t)(c ^ 0xFFFFFFFFu);
}

/* configure(long_crc_address, long_crc_min_bytes): 0 as the address keeps the table loop */
static PyObject *
kernels_configure(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    int64_t address, min_bytes;
    if (check_nargs(nargs, 2, "configure") < 0 || arg_i64(args[0], "address", &address) < 0 ||
        arg_i64(args[1], "min_bytes", &min_bytes) < 0) {
        return NULL;
    }
    long_crc = address ? (long_crc_fn)(uintptr_t)address : NULL;
    long_crc_min = min_bytes > 0 ? min_bytes : 1;
    Py_RETURN_NONE;
}

/* crc32(data, crc): zlib.crc32 through this module's path (for the tests) */
static PyObject *
kernels_crc32(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    Bufs b = {.n = 0};
    Py_ssize_t n;
    int64_t crc;
    if (check_nargs(nargs, 2, "crc32") < 0) {
        return NULL;
    }
    const uint8_t *data = bufs_get(&b, args[0], "data", 1, K_U8, 0, 0, 0, &n);
    if (data == NULL || arg_i64(args[1], "crc", &crc) < 0) {
        bufs_release(&b);
        return NULL;
    }
    int64_t c;
    Py_BEGIN_ALLOW_THREADS
    c = crc32_range(data, 0, n, crc);
    Py_END_ALLOW_THREADS
    bufs_release(&b);
    return PyLong_FromLongLong(c);
}

/* -- properties ---------------------------------------------------------------------- */

/* Continue Java's String.hashCode over the UTF-8 bytes buf[p:end] as UTF-16 code units
 * (an invalid byte counts as U+FFFD, as Java's decoder makes it). */
static inline int64_t
java_hash_utf8(const uint8_t *buf, int64_t p, int64_t end, int64_t h)
{
    while (p < end) {
        int64_t b0 = buf[p];
        int64_t cp = 0xFFFD;
        int n = 1;
        if (b0 < 0x80) {
            cp = b0;
        }
        else if (b0 >= 0xC2 && b0 < 0xE0 && p + 1 < end && (buf[p + 1] & 0xC0) == 0x80) {
            cp = ((b0 & 0x1F) << 6) | (buf[p + 1] & 0x3F);
            n = 2;
        }
        else if (b0 >= 0xE0 && b0 < 0xF0 && p + 2 < end && (buf[p + 1] & 0xC0) == 0x80 &&
                 (buf[p + 2] & 0xC0) == 0x80) {
            cp = ((b0 & 0x0F) << 12) | ((buf[p + 1] & 0x3F) << 6) | (buf[p + 2] & 0x3F);
            n = 3;
        }
        else if (b0 >= 0xF0 && b0 < 0xF5 && p + 3 < end && (buf[p + 1] & 0xC0) == 0x80 &&
                 (buf[p + 2] & 0xC0) == 0x80 && (buf[p + 3] & 0xC0) == 0x80) {
            cp = ((b0 & 0x07) << 18) | ((buf[p + 1] & 0x3F) << 12) | ((buf[p + 2] & 0x3F) << 6) |
                 (buf[p + 3] & 0x3F);
            n = 4;
        }
        if (cp >= 0x10000) {
            cp -= 0x10000;
            h = (31 * h + (0xD800 | (cp >> 10))) & 0xFFFFFFFF;
            h = (31 * h + (0xDC00 | (cp & 0x3FF))) & 0xFFFFFFFF;
        }
        else {
            h = (31 * h + cp) & 0xFFFFFFFF;
        }
        p += n;
    }
    return h;
}

typedef struct {
    int64_t tags_code; /* Java hash of TAGS as a signed 32-bit value; 0 without TAGS */
    int64_t nkeys;     /* keys found so far, this record's included */
    int delay;         /* a DELAY property */
    int ok;            /* nothing but name\x01value\x02 pairs with non-empty names */
    int overflow;      /* the key arrays were too small (a caller's error) */
} Props;

static inline int
name_is(const uint8_t *buf, int64_t p, int64_t n, const char *name, int64_t len)
{
    return n == len && memcmp(buf + p, name, (size_t)len) == 0;
}

/* One record's properties buf[p:pend] (the caller checked pend <= its length): TAGS
 * hash, KEYS (space separated) and UNIQ_KEY hashes (CRC-32 continued from ``prefix``,
 * the CRC of "topic#", masked to 31 bits) appended to key_hashes / key_recs from
 * ``nkeys`` on (at most ``cap``), whether it has DELAY and whether it is well formed.
 * Scanning stops at the first defect. (connector.protocol.properties and
 * connector.protocol.hashing are the plain-Python rules.) */
static inline Props
scan_props(const uint8_t *buf, int64_t p, int64_t pend, int64_t prefix, int64_t rec,
           int64_t *key_hashes, int64_t *key_recs, int64_t key_stride, int64_t nkeys,
           int64_t cap)
{
    Props r = {0, nkeys, 0, 0, 0};
    while (p < pend) {
        int64_t name_end = p;
        while (name_end < pend && !(buf[name_end] > 0 && buf[name_end] < 3)) {
            name_end++;
        }
        if (name_end >= pend || name_end == p || buf[name_end] != 1) {
            return r;
        }
        int64_t value = name_end + 1, value_end = value;
        while (value_end < pend && !(buf[value_end] > 0 && buf[value_end] < 3)) {
            value_end++;
        }
        if (value_end >= pend || buf[value_end] != 2) {
            return r;
        }
        int64_t nlen = name_end - p;
        if (name_is(buf, p, nlen, "TAGS", 4)) {
            int64_t code = java_hash_utf8(buf, value, value_end, 0);
            r.tags_code = (code & 0x80000000) ? code - ((int64_t)1 << 32) : code;
        }
        else if (name_is(buf, p, nlen, "UNIQ_KEY", 8)) {
            if (value_end > value) {
                if (r.nkeys >= cap) {
                    r.overflow = 1;
                    return r;
                }
                key_hashes[r.nkeys * key_stride] =
                    crc32_range(buf, value, value_end, prefix) & 0x7FFFFFFF;
                key_recs[r.nkeys * key_stride] = rec;
                r.nkeys++;
            }
        }
        else if (name_is(buf, p, nlen, "KEYS", 4)) {
            int64_t k = value;
            while (k < value_end) {
                while (k < value_end && buf[k] == ' ') {
                    k++;
                }
                int64_t kend = k;
                while (kend < value_end && buf[kend] != ' ') {
                    kend++;
                }
                if (kend > k) {
                    if (r.nkeys >= cap) {
                        r.overflow = 1;
                        return r;
                    }
                    key_hashes[r.nkeys * key_stride] =
                        crc32_range(buf, k, kend, prefix) & 0x7FFFFFFF;
                    key_recs[r.nkeys * key_stride] = rec;
                    r.nkeys++;
                }
                k = kend;
            }
        }
        else if (name_is(buf, p, nlen, "DELAY", 5)) {
            r.delay = 1;
        }
        p = value_end + 1;
    }
    r.ok = 1;
    return r;
}

#endif
