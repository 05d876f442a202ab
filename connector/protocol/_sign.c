/* connector.protocol._sign: RocketMQ ACL 1.0's remoting signature in one call.
 *
 * remoting_signature(ext, body, inner, outer) -> str: the Base64 of HMAC-SHA1 over the
 * values of ``ext`` in key order (every key but "Signature" and "_UNIQUE_KEY_QUERY"),
 * concatenated as UTF-8, then ``body``. ``inner`` and ``outer`` are hashlib SHA-1
 * objects already fed the key XOR ipad / opad (RFC 2104; connector/protocol/acl.py's
 * RemotingSigner makes them), copied, never changed; ``states`` (``keyed_states``) the
 * same two SHA-1 states as 40 bytes. A request whose body is under SMALL_BODY bytes
 * (every single send) is hashed here from ``states`` when the CPU has the SHA
 * instructions (x86 SHA-NI), one under SMALL_BODY_PORTABLE bytes when it has not:
 * through hashlib, the copies, updates and digests of a request cost ~1 us of overhead
 * (~3-4 us without SHA-NI, timed in a tight loop; ~3x that in a broker's real path),
 * more than hashing a few blocks here. Larger bodies (batches) go through the hashlib
 * objects (OpenSSL, which uses the SHA instructions or vector code, and lets other
 * threads run meanwhile). No OpenSSL headers here.
 *
 * begin_signature(ext, body, inner, outer, states) -> Pending: the same signature, its
 * body hashed on a native thread of this module while the caller goes on (the broker
 * checks a large batch while it scans it); ``Pending.result()`` waits for it (the GIL
 * released) and returns the text. The hashing needs no GIL, so it runs beside the
 * caller's Python on another core. One worker thread a process, one body at a time: a
 * body that finds it busy is hashed by the caller at once. The worker is started on
 * first use, and again in a forked child. It hashes with the SHA instructions only: on
 * a CPU without them, the signature is made at once through hashlib (OpenSSL's SHA-1
 * is ~2x this module's portable one there: more than the overlap wins).
 *
 * Why C: the same steps in Python (sort, pick, join, encode, eight hash calls, Base64)
 * run ~25 bytecode-level calls per request on both edges of every signed request; timed
 * in the broker's real path they cost ~3x their tight-loop time (cold caches between
 * requests), so fewer steps matter more than their sum suggests. The plain-Python twin
 * (_sign_py.py) is the reference the tests compare this with.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define HAVE_SHANI_CODE 1
#include <cpuid.h>
#include <immintrin.h>
#endif

#define SMALL_BODY 16384
/* without them: the portable compression hashes ~2x slower than OpenSSL, so only a
 * body this small (a single send) is hashed here, where the ~3-4 us of hashlib calls
 * outweigh it */
#define SMALL_BODY_PORTABLE 1024

static int use_shani; /* the CPU has SHA-NI (and SSSE3 / SSE4.1): set at import */

/* -- SHA-1 compression (FIPS 180-4), portable ------------------------------------- */

static inline uint32_t
rol(uint32_t x, int n)
{
    return (x << n) | (x >> (32 - n));
}

static inline uint32_t
load_be32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | (uint32_t)p[3];
}

/* The message schedule kept as the last 16 words (W[t] lands where W[t - 16] was), the
 * rounds written out five at a time with the five working variables renamed instead of
 * moved, and each of the four round functions in its own run of 20 rounds: no branch
 * inside a block. (A loop over 80 rounds that picks the function by ``t`` and shifts
 * a..e every round ran at ~75 MB/s here; this form at several times that.) */
#define SCHED(t) (w[(t) & 15] = rol(w[((t) + 13) & 15] ^ w[((t) + 8) & 15] ^ w[((t) + 2) & 15] ^ w[(t) & 15], 1))
#define F_CHOOSE(b, c, d) ((d) ^ ((b) & ((c) ^ (d))))
#define F_PARITY(b, c, d) ((b) ^ (c) ^ (d))
#define F_MAJORITY(b, c, d) (((b) & (c)) | ((d) & ((b) | (c))))
#define ROUND(a, b, c, d, e, fn, k, wt)                                                      \
    do {                                                                                    \
        e += rol(a, 5) + fn(b, c, d) + (k) + (wt);                                          \
        b = rol(b, 30);                                                                     \
    } while (0)
#define FIVE(t, fn, k, word)                                                                \
    ROUND(a, b, c, d, e, fn, k, word(t));                                                   \
    ROUND(e, a, b, c, d, fn, k, word((t) + 1));                                             \
    ROUND(d, e, a, b, c, fn, k, word((t) + 2));                                             \
    ROUND(c, d, e, a, b, fn, k, word((t) + 3));                                             \
    ROUND(b, c, d, e, a, fn, k, word((t) + 4));
#define TWENTY(t, fn, k)                                                                    \
    FIVE(t, fn, k, SCHED) FIVE((t) + 5, fn, k, SCHED) FIVE((t) + 10, fn, k, SCHED)          \
    FIVE((t) + 15, fn, k, SCHED)
#define FIRST(t) (w[t])

static void
compress_portable(uint32_t h[5], const uint8_t *p, size_t blocks)
{
    for (; blocks > 0; blocks--, p += 64) {
        uint32_t w[16];
        for (int t = 0; t < 16; t++) {
            w[t] = load_be32(p + 4 * t);
        }
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        FIVE(0, F_CHOOSE, 0x5A827999, FIRST)
        FIVE(5, F_CHOOSE, 0x5A827999, FIRST)
        FIVE(10, F_CHOOSE, 0x5A827999, FIRST)
        ROUND(a, b, c, d, e, F_CHOOSE, 0x5A827999, w[15]);
        ROUND(e, a, b, c, d, F_CHOOSE, 0x5A827999, SCHED(16));
        ROUND(d, e, a, b, c, F_CHOOSE, 0x5A827999, SCHED(17));
        ROUND(c, d, e, a, b, F_CHOOSE, 0x5A827999, SCHED(18));
        ROUND(b, c, d, e, a, F_CHOOSE, 0x5A827999, SCHED(19));
        TWENTY(20, F_PARITY, 0x6ED9EBA1)
        TWENTY(40, F_MAJORITY, 0x8F1BBCDC)
        TWENTY(60, F_PARITY, 0xCA62C1D6)
        h[0] += a;
        h[1] += b;
        h[2] += c;
        h[3] += d;
        h[4] += e;
    }
}
#undef FIRST
#undef TWENTY
#undef FIVE
#undef ROUND
#undef F_MAJORITY
#undef F_PARITY
#undef F_CHOOSE
#undef SCHED

#ifdef HAVE_SHANI_CODE
/* The same with the SHA instructions: sha1rnds4 does four rounds (its immediate picks
 * the round function of rounds 0-19, 20-39, 40-59, 60-79), sha1nexte derives the next
 * four rounds' E from the state before the last four, sha1msg1 / sha1msg2 extend the
 * message schedule four words at a time. A register holds words big-endian-first
 * (A, or W[4g], in the top lane). */
__attribute__((target("sha,sse4.1,ssse3"))) static void
compress_shani(uint32_t h[5], const uint8_t *p, size_t blocks)
{
    const __m128i reverse = _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m128i abcd = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)h), 0x1B);
    __m128i e0 = _mm_set_epi32((int)h[4], 0, 0, 0);
    for (; blocks > 0; blocks--, p += 64) {
        __m128i w[20];
        for (int g = 0; g < 4; g++) {
            w[g] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * g)), reverse);
        }
        for (int g = 4; g < 20; g++) {
            w[g] = _mm_sha1msg2_epu32(
                _mm_xor_si128(_mm_sha1msg1_epu32(w[g - 4], w[g - 3]), w[g - 2]), w[g - 1]);
        }
        const __m128i abcd_start = abcd, e_start = e0;
        __m128i e = _mm_add_epi32(e0, w[0]);
        __m128i before = abcd; /* the state before the last four rounds */
        abcd = _mm_sha1rnds4_epu32(abcd, e, 0);
#define FOUR(g, fn)                                                                          \
    e = _mm_sha1nexte_epu32(before, w[g]);                                                  \
    before = abcd;                                                                          \
    abcd = _mm_sha1rnds4_epu32(abcd, e, fn);
        FOUR(1, 0) FOUR(2, 0) FOUR(3, 0) FOUR(4, 0)
        FOUR(5, 1) FOUR(6, 1) FOUR(7, 1) FOUR(8, 1) FOUR(9, 1)
        FOUR(10, 2) FOUR(11, 2) FOUR(12, 2) FOUR(13, 2) FOUR(14, 2)
        FOUR(15, 3) FOUR(16, 3) FOUR(17, 3) FOUR(18, 3) FOUR(19, 3)
#undef FOUR
        e0 = _mm_sha1nexte_epu32(before, e_start); /* E after round 80, plus E at the start */
        abcd = _mm_add_epi32(abcd, abcd_start);
    }
    _mm_storeu_si128((__m128i *)h, _mm_shuffle_epi32(abcd, 0x1B));
    h[4] = (uint32_t)_mm_extract_epi32(e0, 3);
}

static int
cpu_has_shani(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 9)) || !(c & (1u << 19))) {
        return 0; /* SSSE3, SSE4.1 */
    }
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
        return 0;
    }
    return (b >> 29) & 1; /* SHA */
}
#endif

static void
compress(uint32_t h[5], const uint8_t *p, size_t blocks, int shani)
{
#ifdef HAVE_SHANI_CODE
    if (shani) {
        compress_shani(h, p, blocks);
        return;
    }
#endif
    (void)shani;
    compress_portable(h, p, blocks);
}

/* finish a SHA-1 whose state ``h`` has taken ``before`` bytes (whole blocks) with the
 * ``n`` bytes at ``p``; the digest into ``out`` */
static void
finish(uint32_t h[5], uint64_t before, const uint8_t *p, size_t n, uint8_t out[20], int shani)
{
    size_t whole = n / 64;
    compress(h, p, whole, shani);
    uint8_t tail[128];
    size_t rest = n - 64 * whole;
    memcpy(tail, p + 64 * whole, rest);
    tail[rest] = 0x80;
    size_t len = rest + 9 <= 64 ? 64 : 128;
    memset(tail + rest + 1, 0, len - rest - 1);
    uint64_t bits = (before + n) * 8;
    for (int i = 0; i < 8; i++) {
        tail[len - 1 - i] = (uint8_t)(bits >> (8 * i));
    }
    compress(h, tail, len / 64, shani);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

static void
unpack_state(const uint8_t *raw, uint32_t h[5])
{
    for (int i = 0; i < 5; i++) {
        h[i] = ((uint32_t)raw[4 * i] << 24) | ((uint32_t)raw[4 * i + 1] << 16)
             | ((uint32_t)raw[4 * i + 2] << 8) | (uint32_t)raw[4 * i + 3];
    }
}

static void
pack_state(const uint32_t h[5], uint8_t *raw)
{
    for (int i = 0; i < 5; i++) {
        raw[4 * i] = (uint8_t)(h[i] >> 24);
        raw[4 * i + 1] = (uint8_t)(h[i] >> 16);
        raw[4 * i + 2] = (uint8_t)(h[i] >> 8);
        raw[4 * i + 3] = (uint8_t)h[i];
    }
}

static const uint32_t SHA1_IV[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};

static PyObject *s_copy, *s_update, *s_digest;

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/* a growing byte buffer, on the stack while small */
typedef struct {
    char *p;
    Py_ssize_t used, cap;
    char small[2048];
} Buf;

static void
buf_init(Buf *b)
{
    b->p = b->small;
    b->used = 0;
    b->cap = (Py_ssize_t)sizeof(b->small);
}

static void
buf_free(Buf *b)
{
    if (b->p != b->small) {
        PyMem_Free(b->p);
    }
}

static int
buf_add(Buf *b, const void *src, Py_ssize_t n)
{
    if (b->used + n > b->cap) {
        Py_ssize_t want = 2 * (b->used + n);
        char *bigger = PyMem_Malloc((size_t)want);
        if (bigger == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        memcpy(bigger, b->p, (size_t)b->used);
        buf_free(b);
        b->p = bigger;
        b->cap = want;
    }
    memcpy(b->p + b->used, src, (size_t)n);
    b->used += n;
    return 0;
}

/* a hash object's copy fed ``data`` (and ``more`` when not NULL), then its digest */
static PyObject *
hashed(PyObject *prototype, PyObject *data, PyObject *more)
{
    PyObject *h = PyObject_CallMethodNoArgs(prototype, s_copy);
    if (h == NULL) {
        return NULL;
    }
    PyObject *r = PyObject_CallMethodOneArg(h, s_update, data);
    if (r != NULL && more != NULL) {
        Py_DECREF(r);
        r = PyObject_CallMethodOneArg(h, s_update, more);
    }
    PyObject *digest = NULL;
    if (r != NULL) {
        Py_DECREF(r);
        digest = PyObject_CallMethodNoArgs(h, s_digest);
    }
    Py_DECREF(h);
    return digest;
}

static int
is_unsigned_key(PyObject *key)
{
    return PyUnicode_CompareWithASCIIString(key, "Signature") == 0
        || PyUnicode_CompareWithASCIIString(key, "_UNIQUE_KEY_QUERY") == 0;
}

/* the signed values of ``ext`` in key order, appended to ``b`` */
static int
add_values(Buf *b, PyObject *ext)
{
    PyObject *keys = PyDict_Keys(ext);
    if (keys == NULL) {
        return -1;
    }
    int rc = -1;
    if (PyList_Sort(keys) < 0) {
        goto done;
    }
    Py_ssize_t n = PyList_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        if (!PyUnicode_Check(key)) {
            PyErr_SetString(PyExc_TypeError, "ext keys must be str");
            goto done;
        }
        if (is_unsigned_key(key)) {
            continue;
        }
        PyObject *value = PyDict_GetItemWithError(ext, key); /* borrowed */
        if (value == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_RuntimeError, "ext changed while it was signed");
            }
            goto done;
        }
        if (!PyUnicode_Check(value)) {
            PyErr_Format(PyExc_TypeError, "ext value of %R must be str", key);
            goto done;
        }
        Py_ssize_t len;
        const char *text = PyUnicode_AsUTF8AndSize(value, &len);
        if (text == NULL || buf_add(b, text, len) < 0) {
            goto done;
        }
    }
    rc = 0;
done:
    Py_DECREF(keys);
    return rc;
}

static PyObject *
base64_of(const unsigned char d[20])
{
    char text[28];
    int t = 0;
    for (int i = 0; i < 18; i += 3) { /* 20 bytes: six groups of 3, then 2 and a pad */
        unsigned v = ((unsigned)d[i] << 16) | ((unsigned)d[i + 1] << 8) | d[i + 2];
        text[t++] = B64[(v >> 18) & 63];
        text[t++] = B64[(v >> 12) & 63];
        text[t++] = B64[(v >> 6) & 63];
        text[t++] = B64[v & 63];
    }
    unsigned v = ((unsigned)d[18] << 16) | ((unsigned)d[19] << 8);
    text[t++] = B64[(v >> 18) & 63];
    text[t++] = B64[(v >> 12) & 63];
    text[t++] = B64[(v >> 6) & 63];
    text[t++] = '=';
    return PyUnicode_DecodeASCII(text, 28, NULL);
}

/* HMAC-SHA1 of b's bytes from the two keyed states (40 bytes: inner, outer) */
static void
hmac_here(const uint8_t *states, const Buf *b, uint8_t digest[20])
{
    uint32_t h[5];
    uint8_t inner[20];
    unpack_state(states, h);
    finish(h, 64, (const uint8_t *)b->p, (size_t)b->used, inner, use_shani);
    unpack_state(states + 20, h);
    finish(h, 64, inner, 20, digest, use_shani);
}

/* HMAC-SHA1 of b's bytes, then ``body`` (NULL: none), through the hashlib objects
 * ``args[2]`` (inner) and ``args[3]`` (outer): OpenSSL, which hashes a large body with
 * the GIL released */
static int
hmac_hashlib(PyObject *const *args, const Buf *b, PyObject *body, uint8_t digest[20])
{
    PyObject *content = PyBytes_FromStringAndSize(b->p, b->used);
    if (content == NULL) {
        return -1;
    }
    PyObject *inner = hashed(args[2], content, body);
    Py_DECREF(content);
    if (inner == NULL) {
        return -1;
    }
    PyObject *outer = hashed(args[3], inner, NULL);
    Py_DECREF(inner);
    if (outer == NULL) {
        return -1;
    }
    if (!PyBytes_Check(outer) || PyBytes_GET_SIZE(outer) != 20) {
        Py_DECREF(outer);
        PyErr_SetString(PyExc_TypeError, "inner and outer must be SHA-1 hash objects");
        return -1;
    }
    memcpy(digest, PyBytes_AS_STRING(outer), 20);
    Py_DECREF(outer);
    return 0;
}

/* the arguments (ext, body, inner, outer, states) both signature calls take */
static int
check_args(PyObject *const *args, Py_ssize_t nargs, const char *name)
{
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "%s(ext, body, inner, outer, states)", name);
        return -1;
    }
    if (!PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "ext must be a dict");
        return -1;
    }
    if (!PyBytes_Check(args[4]) || PyBytes_GET_SIZE(args[4]) != 40) {
        PyErr_SetString(PyExc_TypeError, "states must be keyed_states' 40 bytes");
        return -1;
    }
    return 0;
}

/* the HMAC-SHA1 of ``ext``'s signed values, then ``body``, into ``digest`` (args as
 * check_args: ext, body, inner, outer, states) */
static int
signature_digest(PyObject *const *args, uint8_t digest[20])
{
    PyObject *ext = args[0], *body = args[1], *states = args[4];
    Py_ssize_t body_len = PyObject_Size(body);
    if (body_len < 0) {
        return -1;
    }
    Buf b;
    buf_init(&b);
    if (add_values(&b, ext) < 0) {
        buf_free(&b);
        return -1;
    }
    int rc;
    if (body_len < (use_shani ? SMALL_BODY : SMALL_BODY_PORTABLE)) {
        Py_buffer view;
        if (PyObject_GetBuffer(body, &view, PyBUF_SIMPLE) < 0) {
            buf_free(&b);
            return -1;
        }
        rc = buf_add(&b, view.buf, view.len);
        PyBuffer_Release(&view);
        if (rc == 0) {
            hmac_here((const uint8_t *)PyBytes_AS_STRING(states), &b, digest);
        }
    } else {
        rc = hmac_hashlib(args, &b, body_len > 0 ? body : NULL, digest);
    }
    buf_free(&b);
    return rc;
}

static PyObject *
k_remoting_signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    uint8_t digest[20];
    if (check_args(args, nargs, "remoting_signature") < 0 || signature_digest(args, digest) < 0) {
        return NULL;
    }
    return base64_of(digest);
}

/* -- the rest of a check: the signature compared, the request's number ---------------- */

/* what settle / verify answer (connector/protocol/acl.py names them) */
enum { CHECK_OK = 0, CHECK_MISMATCH = 1, CHECK_MALFORMED = 2, CHECK_EXPIRED = 3, CHECK_REPLAYED = 4 };

static PyObject *s_signature, *s_sign_seq, *s_sign_time, *s_access_key;

/* ``text`` (n bytes) as a decimal of 1 to 18 ASCII digits, else -1 */
static long long
digits(const char *text, Py_ssize_t n)
{
    if (n < 1 || n > 18) {
        return -1;
    }
    long long v = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (text[i] < '0' || text[i] > '9') {
            return -1;
        }
        v = 10 * v + (text[i] - '0');
    }
    return v;
}

/* whether ``ext``'s Signature is ``expected`` (28 ASCII bytes), in time independent of
 * where they differ */
static int
signature_is(PyObject *ext, const char *expected)
{
    PyObject *sent = PyDict_GetItemWithError(ext, s_signature); /* borrowed */
    if (sent == NULL) {
        return PyErr_Occurred() ? -1 : 0;
    }
    if (!PyUnicode_Check(sent)) {
        return 0;
    }
    Py_ssize_t len;
    const char *text = PyUnicode_AsUTF8AndSize(sent, &len);
    if (text == NULL) {
        return -1;
    }
    if (len != 28) {
        return 0;
    }
    unsigned diff = 0;
    for (int i = 0; i < 28; i++) {
        diff |= (unsigned)(unsigned char)text[i] ^ (unsigned)(unsigned char)expected[i];
    }
    return diff == 0;
}

/* Unix milliseconds now */
static long long
wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* the check once the signature is known (see settle) */
static PyObject *
settle_with(PyObject *ext, const char *expected, PyObject *seqs, long long now, long long window)
{
    int same = signature_is(ext, expected);
    if (same <= 0) {
        return same < 0 ? NULL : PyLong_FromLong(CHECK_MISMATCH);
    }
    PyObject *seq = PyDict_GetItemWithError(ext, s_sign_seq); /* borrowed */
    if (seq == NULL) {
        return PyErr_Occurred() ? NULL : PyLong_FromLong(CHECK_OK); /* not numbered */
    }
    PyObject *sent = PyDict_GetItemWithError(ext, s_sign_time);
    if (sent == NULL && PyErr_Occurred()) {
        return NULL;
    }
    if (!PyUnicode_Check(seq) || sent == NULL || !PyUnicode_Check(sent)) {
        return PyLong_FromLong(CHECK_MALFORMED);
    }
    Py_ssize_t seq_len, sent_len;
    const char *seq_text = PyUnicode_AsUTF8AndSize(seq, &seq_len);
    const char *sent_text = seq_text ? PyUnicode_AsUTF8AndSize(sent, &sent_len) : NULL;
    if (sent_text == NULL) {
        return NULL;
    }
    Py_ssize_t dash = seq_len - 1;
    while (dash >= 0 && seq_text[dash] != '-') {
        dash--;
    }
    long long n = dash >= 0 ? digits(seq_text + dash + 1, seq_len - dash - 1) : -1;
    long long sent_ms = digits(sent_text, sent_len);
    if (n < 0 || sent_ms < 0) {
        return PyLong_FromLong(CHECK_MALFORMED);
    }
    if (now < 0) {
        now = wall_ms();
    }
    if (sent_ms > now + window || sent_ms < now - window) {
        return PyLong_FromLong(CHECK_EXPIRED);
    }
    PyObject *instance = PyUnicode_FromStringAndSize(seq_text, dash);
    if (instance == NULL) {
        return NULL;
    }
    PyObject *last = PyDict_GetItemWithError(seqs, instance); /* borrowed */
    if (last == NULL && PyErr_Occurred()) {
        Py_DECREF(instance);
        return NULL;
    }
    if (last != NULL && PyTuple_Check(last) && PyTuple_GET_SIZE(last) == 2) {
        long long before = PyLong_AsLongLong(PyTuple_GET_ITEM(last, 0));
        if (before == -1 && PyErr_Occurred()) {
            Py_DECREF(instance);
            return NULL;
        }
        if (n <= before) {
            Py_DECREF(instance);
            return PyLong_FromLong(CHECK_REPLAYED);
        }
    }
    PyObject *entry = Py_BuildValue("(LL)", n, now);
    int rc = entry == NULL ? -1 : PyDict_SetItem(seqs, instance, entry);
    Py_XDECREF(entry);
    Py_DECREF(instance);
    return rc < 0 ? NULL : PyLong_FromLong(CHECK_OK);
}

/* seqs, now_ms, window_ms: a dict and two ints */
static int
check_settle_args(PyObject *seqs, PyObject *now, PyObject *window, long long *now_ms,
                  long long *window_ms)
{
    if (!PyDict_Check(seqs)) {
        PyErr_SetString(PyExc_TypeError, "seqs must be a dict");
        return -1;
    }
    *now_ms = PyLong_AsLongLong(now);
    *window_ms = *now_ms == -1 && PyErr_Occurred() ? -1 : PyLong_AsLongLong(window);
    return PyErr_Occurred() ? -1 : 0;
}

/* sign(inner, outer, states, access_key, instance, counter, ext, body) -> None: a
 * client's whole signing of one request: ``ext`` gets AccessKey, then (``instance``
 * not None) pymqSignTime (the clock now, Unix ms) and pymqSignSeq (``instance-n``, n
 * the next of the iterator ``counter``), then Signature over all of them and ``body``.
 * The keys and the numbering first, so that a functools.partial of them signs one
 * connection's requests in one call. */
static PyObject *
k_sign(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 8 || !PyUnicode_Check(args[3]) || !PyDict_Check(args[6])) {
        PyErr_SetString(PyExc_TypeError,
                        "sign(inner, outer, states, access_key: str, instance, counter, ext: dict, body)");
        return NULL;
    }
    PyObject *ext = args[6], *instance = args[4];
    if (PyDict_SetItem(ext, s_access_key, args[3]) < 0) {
        return NULL;
    }
    if (instance != Py_None) {
        if (!PyUnicode_Check(instance)) {
            PyErr_SetString(PyExc_TypeError, "instance must be a str or None");
            return NULL;
        }
        if (!PyIter_Check(args[5])) {
            PyErr_SetString(PyExc_TypeError, "counter must be an iterator");
            return NULL;
        }
        PyObject *n = PyIter_Next(args[5]);
        if (n == NULL) {
            if (!PyErr_Occurred()) {
                PyErr_SetString(PyExc_ValueError, "the request numbers ran out");
            }
            return NULL;
        }
        PyObject *seq = PyUnicode_FromFormat("%U-%S", instance, n);
        Py_DECREF(n);
        PyObject *now = PyUnicode_FromFormat("%lld", wall_ms());
        int rc = seq == NULL || now == NULL || PyDict_SetItem(ext, s_sign_time, now) < 0
              || PyDict_SetItem(ext, s_sign_seq, seq) < 0;
        Py_XDECREF(seq);
        Py_XDECREF(now);
        if (rc) {
            return NULL;
        }
    }
    PyObject *sign_args[5] = {ext, args[7], args[0], args[1], args[2]};
    uint8_t digest[20];
    if (check_args(sign_args, 5, "sign") < 0 || signature_digest(sign_args, digest) < 0) {
        return NULL;
    }
    PyObject *text = base64_of(digest);
    int rc = text == NULL ? -1 : PyDict_SetItem(ext, s_signature, text);
    Py_XDECREF(text);
    if (rc < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

/* settle(ext, expected, seqs, now_ms, window_ms) -> int */
static PyObject *
k_settle(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 5 || !PyDict_Check(args[0]) || !PyUnicode_Check(args[1])) {
        PyErr_SetString(PyExc_TypeError, "settle(ext: dict, expected: str, seqs, now_ms, window_ms)");
        return NULL;
    }
    long long now, window;
    if (check_settle_args(args[2], args[3], args[4], &now, &window) < 0) {
        return NULL;
    }
    Py_ssize_t len;
    const char *expected = PyUnicode_AsUTF8AndSize(args[1], &len);
    if (expected == NULL) {
        return NULL;
    }
    if (len != 28) {
        return PyLong_FromLong(CHECK_MISMATCH);
    }
    return settle_with(args[0], expected, args[2], now, window);
}

/* verify(inner, outer, states, ext, body, seqs, now_ms, window_ms) -> int: the keys
 * first, so that a functools.partial of them checks one account's requests */
static PyObject *
k_verify(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 8) {
        PyErr_SetString(PyExc_TypeError,
                        "verify(inner, outer, states, ext, body, seqs, now_ms, window_ms)");
        return NULL;
    }
    PyObject *sign_args[5] = {args[3], args[4], args[0], args[1], args[2]};
    long long now, window;
    uint8_t digest[20];
    if (check_args(sign_args, 5, "verify") < 0
        || check_settle_args(args[5], args[6], args[7], &now, &window) < 0
        || signature_digest(sign_args, digest) < 0) {
        return NULL;
    }
    PyObject *text = base64_of(digest);
    if (text == NULL) {
        return NULL;
    }
    PyObject *status = settle_with(args[3], PyUnicode_AsUTF8(text), args[5], now, window);
    Py_DECREF(text);
    return status;
}

/* -- a large body hashed on a native thread ----------------------------------------- */

typedef struct {
    PyObject_HEAD
    Py_buffer view;  /* the body, held until it is hashed */
    int has_view;
    uint32_t h[5];   /* the inner state: key block, the content, the body's first bytes */
    uint64_t before; /* the bytes taken into h (whole blocks) */
    const uint8_t *p; /* the body's rest */
    size_t n;
    uint8_t outer[20]; /* the outer keyed state, packed */
    uint8_t digest[20];
    int state; /* QUEUED on the worker, else DONE */
} Pending;

enum { DONE = 0, QUEUED = 1 };

static pthread_mutex_t w_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t w_wake = PTHREAD_COND_INITIALIZER;
static pthread_cond_t w_done = PTHREAD_COND_INITIALIZER;
static Pending *w_job; /* queued, not taken yet */
static int w_busy;     /* a job is queued or being hashed */
static int w_running;  /* the worker thread runs in this process */

static void
hash_pending(Pending *j)
{
    uint8_t inner[20];
    uint32_t h[5];
    finish(j->h, j->before, j->p, j->n, inner, use_shani);
    unpack_state(j->outer, h);
    finish(h, 64, inner, 20, j->digest, use_shani);
}

static void *
worker_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&w_lock);
    for (;;) {
        while (w_job == NULL) {
            pthread_cond_wait(&w_wake, &w_lock);
        }
        Pending *j = w_job;
        w_job = NULL;
        pthread_mutex_unlock(&w_lock);
        hash_pending(j);
        pthread_mutex_lock(&w_lock);
        j->state = DONE;
        w_busy = 0;
        pthread_cond_broadcast(&w_done);
    }
    return NULL;
}

/* a forked child has no worker (only the forking thread survives a fork): start afresh */
static void
worker_after_fork(void)
{
    pthread_mutex_init(&w_lock, NULL);
    pthread_cond_init(&w_wake, NULL);
    pthread_cond_init(&w_done, NULL);
    w_job = NULL;
    w_busy = 0;
    w_running = 0;
}

/* hand ``j`` to the worker: 1, or 0 when it is busy or cannot start (hash it here) */
static int
worker_take(Pending *j)
{
    int taken = 0;
    pthread_mutex_lock(&w_lock);
    if (!w_running) {
        pthread_t t;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        w_running = pthread_create(&t, &attr, worker_main, NULL) == 0;
        pthread_attr_destroy(&attr);
    }
    if (w_running && !w_busy) {
        w_busy = 1;
        j->state = QUEUED;
        w_job = j;
        pthread_cond_signal(&w_wake);
        taken = 1;
    }
    pthread_mutex_unlock(&w_lock);
    return taken;
}

/* wait (the GIL released) until the worker has hashed ``j``; then let the body go */
static void
pending_settle(Pending *j)
{
    if (j->state == QUEUED) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&w_lock);
        while (j->state == QUEUED) {
            pthread_cond_wait(&w_done, &w_lock);
        }
        pthread_mutex_unlock(&w_lock);
        Py_END_ALLOW_THREADS
    }
    if (j->has_view) {
        PyBuffer_Release(&j->view);
        j->has_view = 0;
    }
}

static PyObject *
pending_result(PyObject *self, PyObject *unused)
{
    (void)unused;
    Pending *j = (Pending *)self;
    pending_settle(j);
    return base64_of(j->digest);
}

static void
pending_dealloc(PyObject *self)
{
    pending_settle((Pending *)self); /* the worker may still read the body */
    PyObject_Free(self);
}

static PyMethodDef pending_methods[] = {
    {"result", pending_result, METH_NOARGS,
     "result() -> str: the signature (waits for the worker, the GIL released)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject PendingType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "connector.protocol._sign.Pending",
    .tp_basicsize = sizeof(Pending),
    .tp_dealloc = pending_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "a signature being hashed (begin_signature); result() returns it",
    .tp_methods = pending_methods,
};

static PyObject *
k_begin_signature(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (check_args(args, nargs, "begin_signature") < 0) {
        return NULL;
    }
    PyObject *ext = args[0], *states = args[4];
    Pending *j = PyObject_New(Pending, &PendingType);
    if (j == NULL) {
        return NULL;
    }
    j->has_view = 0;
    j->state = DONE;
    if (PyObject_GetBuffer(args[1], &j->view, PyBUF_SIMPLE) < 0) {
        Py_DECREF(j);
        return NULL;
    }
    j->has_view = 1;
    Buf b;
    buf_init(&b);
    if (add_values(&b, ext) < 0) {
        buf_free(&b);
        Py_DECREF(j);
        return NULL;
    }
    if (!use_shani) {
        /* no SHA instructions: OpenSSL hashes here ~2x faster than compress_portable
         * on the worker (~420-860 MB/s against ~220 MB/s, measured), more than the
         * overlap wins, so the signature is made now, on this thread */
        int rc = hmac_hashlib(args, &b, j->view.len > 0 ? args[1] : NULL, j->digest);
        buf_free(&b);
        PyBuffer_Release(&j->view);
        j->has_view = 0;
        if (rc < 0) {
            Py_DECREF(j);
            return NULL;
        }
        return (PyObject *)j;
    }
    const uint8_t *raw = (const uint8_t *)PyBytes_AS_STRING(states);
    const uint8_t *body = (const uint8_t *)j->view.buf;
    size_t body_len = (size_t)j->view.len, used = (size_t)b.used;
    memcpy(j->outer, raw + 20, 20);
    unpack_state(raw, j->h);
    size_t whole = used / 64, rest = used % 64;
    compress(j->h, (const uint8_t *)b.p, whole, use_shani); /* the content's whole blocks */
    j->before = 64 + 64 * (uint64_t)whole;
    j->p = body;
    j->n = body_len;
    if (rest > 0 && body_len >= 64 - rest) { /* the content's tail and the body's head */
        uint8_t block[64];
        memcpy(block, b.p + 64 * whole, rest);
        memcpy(block + rest, body, 64 - rest);
        compress(j->h, block, 1, use_shani);
        j->before += 64;
        j->p = body + (64 - rest);
        j->n = body_len - (64 - rest);
        rest = 0;
    }
    if (rest > 0) { /* a body too short to fill the block: no thread for it */
        int rc = buf_add(&b, body, (Py_ssize_t)body_len);
        if (rc == 0) {
            hmac_here(raw, &b, j->digest);
        }
        buf_free(&b);
        if (rc < 0) {
            Py_DECREF(j);
            return NULL;
        }
        PyBuffer_Release(&j->view);
        j->has_view = 0;
        return (PyObject *)j;
    }
    buf_free(&b);
    if (!worker_take(j)) {
        Py_BEGIN_ALLOW_THREADS
        hash_pending(j);
        Py_END_ALLOW_THREADS
        PyBuffer_Release(&j->view);
        j->has_view = 0;
    }
    return (PyObject *)j;
}

/* keyed_states(key_block) -> 40 bytes: the SHA-1 states after the 64-byte key block
 * XOR ipad (0x36), then after it XOR opad (0x5C) (RFC 2104) */
static PyObject *
k_keyed_states(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 1 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != 64) {
        PyErr_SetString(PyExc_TypeError, "keyed_states(key_block): 64 bytes");
        return NULL;
    }
    const uint8_t *key = (const uint8_t *)PyBytes_AS_STRING(args[0]);
    uint8_t block[64], out[40];
    for (int pad = 0; pad < 2; pad++) {
        uint32_t h[5];
        memcpy(h, SHA1_IV, sizeof(h));
        for (int i = 0; i < 64; i++) {
            block[i] = key[i] ^ (pad == 0 ? 0x36 : 0x5C);
        }
        compress(h, block, 1, use_shani);
        pack_state(h, out + 20 * pad);
    }
    return PyBytes_FromStringAndSize((const char *)out, 40);
}

/* compress(state, blocks, shani) -> state: SHA-1's compression of whole 64-byte blocks
 * from a 20-byte state, with the SHA instructions or without (for the tests: both
 * against the twin) */
static PyObject *
k_compress(PyObject *module, PyObject *const *args, Py_ssize_t nargs)
{
    (void)module;
    if (nargs != 3 || !PyBytes_Check(args[0]) || PyBytes_GET_SIZE(args[0]) != 20
        || !PyBytes_Check(args[1]) || PyBytes_GET_SIZE(args[1]) % 64 != 0) {
        PyErr_SetString(PyExc_TypeError, "compress(state: 20 bytes, blocks: 64*n bytes, shani)");
        return NULL;
    }
    int shani = PyObject_IsTrue(args[2]);
    if (shani < 0) {
        return NULL;
    }
    if (shani && !use_shani) {
        PyErr_SetString(PyExc_ValueError, "this CPU has no SHA instructions");
        return NULL;
    }
    uint32_t h[5];
    uint8_t out[20];
    unpack_state((const uint8_t *)PyBytes_AS_STRING(args[0]), h);
    compress(h, (const uint8_t *)PyBytes_AS_STRING(args[1]),
             (size_t)(PyBytes_GET_SIZE(args[1]) / 64), shani);
    pack_state(h, out);
    return PyBytes_FromStringAndSize((const char *)out, 20);
}

#define METHOD(name, fn, doc) {name, (PyCFunction)(void (*)(void))fn, METH_FASTCALL, doc}

static PyMethodDef methods[] = {
    METHOD("remoting_signature", k_remoting_signature,
           "remoting_signature(ext, body, inner, outer, states) -> str (the module's text)"),
    METHOD("begin_signature", k_begin_signature,
           "begin_signature(ext, body, inner, outer, states) -> Pending (the module's text)"),
    METHOD("sign", k_sign,
           "sign(inner, outer, states, access_key, instance, counter, ext, body) -> None"),
    METHOD("settle", k_settle,
           "settle(ext, expected, seqs, now_ms, window_ms) -> int (connector/protocol/acl.py)"),
    METHOD("verify", k_verify,
           "verify(inner, outer, states, ext, body, seqs, now_ms, window_ms) -> int (settle's)"),
    METHOD("keyed_states", k_keyed_states, "keyed_states(key_block) -> 40 bytes"),
    METHOD("compress", k_compress, "compress(state, blocks, shani) -> state"),
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "connector.protocol._sign",
    "RocketMQ ACL 1.0's remoting signature (connector/protocol/acl.py chooses it).", -1,
    methods,
};

PyMODINIT_FUNC
PyInit__sign(void)
{
#ifdef HAVE_SHANI_CODE
    use_shani = cpu_has_shani();
#endif
    s_copy = PyUnicode_InternFromString("copy");
    s_update = PyUnicode_InternFromString("update");
    s_digest = PyUnicode_InternFromString("digest");
    s_signature = PyUnicode_InternFromString("Signature");
    s_sign_seq = PyUnicode_InternFromString("pymqSignSeq");
    s_sign_time = PyUnicode_InternFromString("pymqSignTime");
    s_access_key = PyUnicode_InternFromString("AccessKey");
    if (s_copy == NULL || s_update == NULL || s_digest == NULL || s_signature == NULL
        || s_sign_seq == NULL || s_sign_time == NULL || s_access_key == NULL) {
        return NULL;
    }
    if (PyType_Ready(&PendingType) < 0) {
        return NULL;
    }
    if (pthread_atfork(NULL, NULL, worker_after_fork) != 0) {
        PyErr_SetString(PyExc_OSError, "pthread_atfork failed");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m != NULL && PyModule_AddIntConstant(m, "SHANI", use_shani) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
