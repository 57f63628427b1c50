/* shoal.format._kernels: extent statistics kernels the numpy versions spend several passes on.
 *
 * tokens(offsets, data, cap) -> (token_offsets, token_data) or None
 *   The distinct tokens (tokens.py: maximal runs of ASCII letters and digits, at least 2
 *   long, lower-cased; every other byte, non-ASCII included, separates them; a run never
 *   crosses from one value into the next) of the string values data[offsets[i]:offsets[i+1]]
 *   (offsets: int64 buffer, n + 1 entries rebased to 0; data: the bytes they cover), in order
 *   of first appearance, as Arrow string buffers: int32 offsets (bytes), data (bytes).
 *   One pass with a hash set of the tokens seen, the GIL released. It stops after the value
 *   that takes the set past `cap` tokens (what comes back then is only known to be over the
 *   cap, all the caller needs). None when tokens collide past MAX_PROBES slots of the set
 *   (they can be chosen to: the hash is not keyed): the caller takes its numpy path.
 *   `numpy_tokenize_array` in tokens.py stays the reference and is tested equal to this.
 *
 * string_hashes(offsets, data, h1, h2, pos, len_key, k1, k2) -> None
 *   The membership hash, version 2, of string values (membership.py's module docstring
 *   defines it; `pos` = STR_POS, `len_key` = STR_LEN, `k1`/`k2` = STR_K1/STR_K2 come from
 *   there) into h1 and h2 (writable uint64 buffers of n). membership.py's numpy form is the
 *   reference.
 *
 * digit_classes(offsets, data, codes) -> first (bytes: int64 values) or None
 *   Classes of the values data[offsets[i]:offsets[i+1]] that are equal once every ASCII digit
 *   byte ('0'-'9') reads as '0' (jsonpaths.py: `digit_classes`; its numpy form,
 *   `numpy_digit_classes`, stays the reference and is tested equal to this): `codes` (a
 *   writable buffer of n int32) gets each value's class, numbered in order of first
 *   occurrence, as Arrow's dictionary_encode numbers them; the result holds the index of
 *   each class's first value, ascending. One pass, eight bytes at a time, with a hash table
 *   of the classes (each keeps its first value's canonical words, up to 512 bytes of them,
 *   so a value of a known class is compared, not lexed again), the GIL released. None
 *   when values collide past MAX_PROBES slots (they can be chosen to: the hash is not
 *   keyed): the caller takes its numpy path.
 *
 * string_bounds(offsets, data, cap) -> (min index, max index) or None
 *   The indexes of the first smallest and the first largest of n >= 1 string values (bytes
 *   compared as unsigned, a prefix before what it prefixes: Arrow's `min_max` order, and
 *   Python's for the UTF-8 strings decoded), or None when a value is longer than `cap` bytes
 *   (stats.py's STRING_MINMAX_CAP rule: such a block has no string bounds). The GIL
 *   released. stats.py's Arrow path (`pc.min_max`) stays the reference.
 *
 * token_hashes(offsets, data, pos, len_key, k1, k2) -> (h1 bytes, h2 bytes) or None
 *   The membership hashes (string_hashes' h1 and h2) of the distinct tokens (the tokens of
 *   `tokens`) of the string values, as n uint64 each, in no order: what string_hashes of
 *   `tokens`' output gives, without keeping the tokens: one pass, a set of each token's
 *   64-bit `base` (two tokens with one base have the same hashes, so one entry sets the same
 *   filter bits as both), the GIL released. For the per-block token filters of a column
 *   whose token set has overflowed (stats.py). None when bases collide past MAX_PROBES
 *   slots (the caller then tokenizes and hashes with `tokens` and string_hashes).
 *
 * bloom_insert(bits, m, k, h1, h2, scaled) -> None
 *   Sets the k probes of each (h1, h2) in `bits` (a writable buffer of ceil(m/8) bytes, bit j
 *   in byte j >> 3, mask 1 << (j & 7)): g_i = h1 + i*h2 (mod 2^64), bit ((g_i >> 32) * m)
 *   >> 32 when `scaled` (the caller's m < 2^32 rule; m < 2^32 is required for it), else g_i
 *   mod m, as BloomFilter.from_hash_parts does with numpy.
 */
#include "_native.h"
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t start;   /* offset of the token in `out` */
    int32_t len;
    uint64_t hash;
    uint64_t head;   /* its first (up to) 8 bytes, lower-cased, little-endian, zero-padded */
} Slot;

typedef struct {
    Slot *slots;     /* len == -1: empty */
    size_t mask, n;
    char *out;       /* distinct tokens, lower-cased, back to back */
    size_t out_len, out_cap;
    int32_t *offsets;
    size_t n_offsets_cap;
} TokenSet;

static unsigned char TOKEN_LOWER[256];  /* lower-cased token byte, 0 for a separator */

/* The k <= 8 bytes at p as a word, the rest 0 (as memcpy places them: on a little-endian
 * machine byte i of the bytes is byte i of the word). `end`: the end of the data, which a
 * whole 8-byte load must not pass. */
static inline uint64_t load_bytes(const unsigned char *p, int64_t k, const unsigned char *end) {
    uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (end - p >= 8) {
        memcpy(&w, p, 8);           /* one load; the bytes past k masked off */
        return k >= 8 ? w : w & ((1ULL << (8 * k)) - 1);
    }
#else
    (void)end;
#endif
    memcpy(&w, p, (size_t)k);
    return w;
}

static void init_table(void) {
    for (int c = 0; c < 256; c++) {
        if (c >= '0' && c <= '9') TOKEN_LOWER[c] = (unsigned char)c;
        else if (c >= 'a' && c <= 'z') TOKEN_LOWER[c] = (unsigned char)c;
        else if (c >= 'A' && c <= 'Z') TOKEN_LOWER[c] = (unsigned char)(c | 0x20);
        else TOKEN_LOWER[c] = 0;
    }
}

static int set_init(TokenSet *ts) {
    memset(ts, 0, sizeof(*ts));
    ts->mask = 1023;
    ts->slots = malloc(sizeof(Slot) * (ts->mask + 1));
    ts->offsets = malloc(sizeof(int32_t) * 1024);
    ts->n_offsets_cap = 1024;
    if (!ts->slots || !ts->offsets) return -1;
    for (size_t i = 0; i <= ts->mask; i++) ts->slots[i].len = -1;
    ts->offsets[0] = 0;
    return 0;
}

static void set_free(TokenSet *ts) {
    free(ts->slots);
    free(ts->out);
    free(ts->offsets);
}

static int set_grow(TokenSet *ts) {
    size_t size = (ts->mask + 1) * 2;
    Slot *slots = malloc(sizeof(Slot) * size);
    if (!slots) return -1;
    for (size_t i = 0; i < size; i++) slots[i].len = -1;
    for (size_t i = 0; i <= ts->mask; i++) {
        if (ts->slots[i].len < 0) continue;
        size_t j = ts->slots[i].hash & (size - 1);
        while (slots[j].len >= 0) j = (j + 1) & (size - 1);
        slots[j] = ts->slots[i];
    }
    free(ts->slots);
    ts->slots = slots;
    ts->mask = size - 1;
    return 0;
}

#define MAX_PROBES 128  /* set slots one token may visit */

/* Whether the token at `src` (len bytes, as in the data) lower-cases to the `len` bytes at
 * `lower`. */
static int lower_equal(const char *lower, const unsigned char *src, int64_t len) {
    for (int64_t k = 0; k < len; k++)
        if ((unsigned char)lower[k] != TOKEN_LOWER[src[k]]) return 0;
    return 1;
}

static int set_insert(TokenSet *ts, size_t j, const unsigned char *src, int64_t len,
                      uint64_t h, uint64_t head);

/* Adds the token at `src` (len bytes as in the data; `h` and `head` already of its
 * lower-cased bytes) if new, lower-cased. A token already in the set costs a probe and a
 * comparison of `head` (and of the bytes past the eighth): nothing is copied, no call made
 * (inlined into the scan; a new token, rare, is `set_insert`'s). 0 ok, -1 no memory, -2 too
 * big, -4 past MAX_PROBES slots. */
static inline __attribute__((always_inline)) int set_add(
        TokenSet *ts, const unsigned char *src, int64_t len, uint64_t h, uint64_t head) {
    size_t j = h & ts->mask;
    for (int probes = 0; ts->slots[j].len >= 0; probes++) {
        Slot *s = &ts->slots[j];
        if (s->hash == h && s->head == head && s->len == len
            && (len <= 8 || lower_equal(ts->out + s->start + 8, src + 8, len - 8)))
            return 0;
        if (probes >= MAX_PROBES) return -4;
        j = (j + 1) & ts->mask;
    }
    return set_insert(ts, j, src, len, h, head);
}

/* Puts a new token into the empty slot j. */
static __attribute__((noinline)) int set_insert(TokenSet *ts, size_t j,
                                                const unsigned char *src, int64_t len,
                                                uint64_t h, uint64_t head) {
    if (len > INT32_MAX || ts->out_len + (size_t)len > (size_t)INT32_MAX) return -2;
    if (ts->out_len + (size_t)len > ts->out_cap) {
        size_t cap = ts->out_cap ? ts->out_cap * 2 : 4096;
        while (cap < ts->out_len + (size_t)len) cap *= 2;
        char *out = realloc(ts->out, cap);
        if (!out) return -1;
        ts->out = out;
        ts->out_cap = cap;
    }
    if (ts->n + 2 > ts->n_offsets_cap) {
        int32_t *o = realloc(ts->offsets, sizeof(int32_t) * ts->n_offsets_cap * 2);
        if (!o) return -1;
        ts->offsets = o;
        ts->n_offsets_cap *= 2;
    }
    for (int64_t k = 0; k < len; k++) ts->out[ts->out_len + (size_t)k] = (char)TOKEN_LOWER[src[k]];
    ts->slots[j] = (Slot){(int64_t)ts->out_len, (int32_t)len, h, head};
    ts->out_len += (size_t)len;
    ts->offsets[++ts->n] = (int32_t)ts->out_len;
    if (2 * ts->n > ts->mask + 1) return set_grow(ts);
    return 0;
}

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Eight bytes at a time (SWAR; the byte at p + i is byte i of a little-endian word). */

/* The high bit of each byte of `w` that is an ASCII letter or digit (a token byte). A
 * byte's low seven bits plus at most 0x50 never carry into the next byte. */
static inline uint64_t token_bits(uint64_t w) {
    uint64_t low7 = w & 0x7F7F7F7F7F7F7F7FULL;
    uint64_t digit = (low7 + 0x5050505050505050ULL) & ~(low7 + 0x4646464646464646ULL);
    uint64_t l = low7 | 0x2020202020202020ULL;                     /* letters lower-cased */
    uint64_t alpha = (l + 0x1F1F1F1F1F1F1F1FULL) & ~(l + 0x0505050505050505ULL);
    return (digit | alpha) & ~w & 0x8080808080808080ULL;
}

/* The token data[s:s + len] (letters and digits only): its hash and `head`, from its
 * lower-cased bytes 8 at a time (a letter or digit lower-cases by setting bit 0x20). */
static inline __attribute__((always_inline)) int add_token(
        TokenSet *ts, const unsigned char *data, int64_t s, int64_t len,
        const unsigned char *end) {
    uint64_t head = load_bytes(data + s, len < 8 ? len : 8, end) | 0x2020202020202020ULL;
    if (len < 8) head &= (1ULL << (8 * len)) - 1;
    uint64_t h = (head ^ ((uint64_t)len * 0x9E3779B97F4A7C15ULL)) * 0xBF58476D1CE4E5B9ULL;
    for (int64_t at = 8; at < len; at += 8) {
        int64_t k = len - at < 8 ? len - at : 8;
        uint64_t w = load_bytes(data + s + at, k, end) | 0x2020202020202020ULL;
        if (k < 8) w &= (1ULL << (8 * k)) - 1;
        h = ((h ^ (h >> 29)) ^ w) * 0x94D049BB133111EBULL;
    }
    h ^= h >> 31;
    return set_add(ts, data + s, len, h, head);
}

static int run_tokens(TokenSet *ts, const int64_t *offsets, Py_ssize_t n,
                      const unsigned char *data, Py_ssize_t cap) {
    int rc = 0;
    const unsigned char *end = data + offsets[n];
    for (Py_ssize_t i = 0; i < n && !rc && (Py_ssize_t)ts->n <= cap; i++) {
        int64_t p = offsets[i], e = offsets[i + 1], start = p;
        uint64_t before = 0;    /* 0x80: the byte before this word is a token byte */
        for (; p < e && !rc; p += 8) {
            int64_t k = e - p < 8 ? e - p : 8;
            uint64_t m = token_bits(load_bytes(data + p, k, end));
            /* A token starts at a token byte after one that is not, ends at a byte that is
             * not after one that is: one turn per token end, its start the last start
             * below it (in this word) or the one carried in. */
            uint64_t prev = (m << 8) | before;
            uint64_t starts = m & ~prev, ends = prev & ~m;
            while (ends && !rc) {
                int b = __builtin_ctzll(ends);
                uint64_t below = starts & ((1ULL << b) - 1);
                if (below) start = p + ((63 - __builtin_clzll(below)) >> 3);
                starts &= ~below;
                int64_t at = p + (b >> 3);
                if (at - start >= 2) rc = add_token(ts, data, start, at - start, end);
                ends &= ends - 1;
            }
            if (starts) start = p + ((63 - __builtin_clzll(starts)) >> 3);
            before = (m >> 56) & 0x80;
        }
        if (before && e - start >= 2 && !rc) rc = add_token(ts, data, start, e - start, end);
    }
    return rc;
}

#else   /* a byte at a time */

static int run_tokens(TokenSet *ts, const int64_t *offsets, Py_ssize_t n,
                      const unsigned char *data, Py_ssize_t cap) {
    int rc = 0;
    for (Py_ssize_t i = 0; i < n && !rc && (Py_ssize_t)ts->n <= cap; i++) {
        int64_t p = offsets[i], e = offsets[i + 1];
        while (p < e && !rc) {
            while (p < e && !TOKEN_LOWER[data[p]]) p++;
            int64_t q = p;
            uint64_t h = 1469598103934665603ULL, head = 0;
            unsigned char c;
            while (q < e && (c = TOKEN_LOWER[data[q]])) {
                h = (h ^ c) * 1099511628211ULL;
                if (q - p < 8) head |= (uint64_t)c << (8 * (q - p));
                q++;
            }
            if (q - p >= 2) {
                h ^= h >> 29;  /* spread the high bits into the low ones the mask keeps */
                rc = set_add(ts, data + p, q - p, h, head);
            }
            p = q;
        }
    }
    return rc;
}
#endif

/* What a kernel run that did not finish returns: -1 MemoryError, -2 OverflowError(`too_big`)
 * (both NULL with the exception set), -4 (past MAX_PROBES slots) None, for the caller's numpy
 * path. */
static PyObject *failed_run(int rc, const char *too_big) {
    if (rc == -1) return PyErr_NoMemory();
    if (rc == -2) {
        PyErr_SetString(PyExc_OverflowError, too_big);
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *tokens(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data;
    Py_ssize_t cap;
    if (!PyArg_ParseTuple(args, "y*y*n", &offsets, &data, &cap)) return NULL;
    PyObject *result = NULL;
    TokenSet ts;
    Py_ssize_t n = strings_ok(&offsets, &data, "tokens");
    if (n < 0) goto done;
    if (set_init(&ts) < 0) {
        set_free(&ts);
        PyErr_NoMemory();
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_tokens(&ts, offsets.buf, n, data.buf, cap);
    Py_END_ALLOW_THREADS
    if (rc)
        result = failed_run(rc, "tokens: over 2 GiB of tokens");
    else
        result = Py_BuildValue("(y#y#)", (const char *)ts.offsets,
                               (Py_ssize_t)(sizeof(int32_t) * (ts.n + 1)),
                               ts.out ? ts.out : "", (Py_ssize_t)ts.out_len);
    set_free(&ts);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

/* -- membership hashes and filters -------------------------------------------------------- */

static inline uint64_t mix64(uint64_t z) {
    z ^= z >> 30;
    z *= 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 27;
    z *= 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return z;
}

static PyObject *string_hashes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data, out1, out2;
    unsigned long long pos, len_key, k1, k2;
    if (!PyArg_ParseTuple(args, "y*y*w*w*KKKK", &offsets, &data, &out1, &out2, &pos, &len_key,
                          &k1, &k2))
        return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = strings_ok(&offsets, &data, "string_hashes");
    if (n < 0) goto done;
    if (out1.len != 8 * n || out2.len != 8 * n) {
        PyErr_SetString(PyExc_ValueError, "string_hashes: the outputs must hold n uint64");
        goto done;
    }
    uint64_t *h1 = out1.buf, *h2 = out2.buf;
    const int64_t *off = offsets.buf;
    const unsigned char *d = data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = off[i];
        uint64_t L = (uint64_t)(off[i + 1] - s), acc = 0;
        uint64_t words = L ? (L + 7) / 8 : 1;
        for (uint64_t j = 0; j < words; j++) {
            uint64_t w = 0, at = 8 * j;
            uint64_t take = L > at ? (L - at < 8 ? L - at : 8) : 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
            if (take == 8) {
                memcpy(&w, d + s + at, 8);  /* the word, little-endian, in one load */
            } else
#endif
            {
                for (uint64_t b = 0; b < take; b++) w |= (uint64_t)d[s + at + b] << (8 * b);
            }
            acc += mix64(w ^ (pos * (j + 1)));
        }
        uint64_t base = acc + L * len_key;
        h1[i] = mix64(base ^ k1);
        h2[i] = mix64(base ^ k2) | 1;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    PyBuffer_Release(&out1);
    PyBuffer_Release(&out2);
    return result;
}

/* -- digit classes ------------------------------------------------------------------------- */

/* The eight bytes of `w` with each ASCII digit byte made '0' (SWAR: a byte's low seven bits
 * plus 0x50 or 0x46 never carry into the next byte; a byte with its high bit set is no
 * digit). */
static inline uint64_t canon_word(uint64_t w) {
    const uint64_t high = 0x8080808080808080ULL;
    uint64_t low7 = w & 0x7F7F7F7F7F7F7F7FULL;
    uint64_t ge_0 = (low7 + 0x5050505050505050ULL) & high;     /* low7 >= 0x30 */
    uint64_t ge_colon = (low7 + 0x4646464646464646ULL) & high; /* low7 >= 0x3A */
    uint64_t digit = ge_0 & ~ge_colon & ~w & high;
    uint64_t mask = (digit >> 7) * 0xFF;
    return (w & ~mask) | (0x3030303030303030ULL & mask);
}

#define KEPT_WORDS 64   /* a value of up to 512 bytes keeps its canonical words */

/* Words of a value, the last one zero-padded (0 is no digit). `words`: where its canonical
 * words go when it has at most KEPT_WORDS of them, else NULL. */
static uint64_t canon_hash(const unsigned char *p, int64_t len, const unsigned char *end,
                           uint64_t *words) {
    uint64_t h = (uint64_t)len * 0x9E3779B97F4A7C15ULL;
    int64_t i = 0;
    if (len > 8 * KEPT_WORDS) words = NULL;
    for (; i + 8 <= len; i += 8) {
        uint64_t w = canon_word(load_bytes(p + i, 8, end));
        if (words) words[i >> 3] = w;
        h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
        h ^= h >> 29;
    }
    if (i < len) {
        uint64_t w = canon_word(load_bytes(p + i, len - i, end));
        if (words) words[i >> 3] = w;
        h = (h ^ w) * 0x94D049BB133111EBULL;
    }
    return mix64(h);
}

static int canon_equal(const unsigned char *a, const unsigned char *b, int64_t len,
                       const unsigned char *end) {
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
        if (canon_word(load_bytes(a + i, 8, end)) != canon_word(load_bytes(b + i, 8, end)))
            return 0;
    return i == len || canon_word(load_bytes(a + i, len - i, end))
                       == canon_word(load_bytes(b + i, len - i, end));
}

typedef struct {
    uint64_t hash;
    int64_t head;    /* index of the class's first value; -1: empty */
    int64_t kept;    /* where its canonical words are in the kept store; -1: too long */
    int32_t code;
} ClassSlot;

/* 0 ok, -1 no memory, -2 over 2^31 classes, -4 past MAX_PROBES slots. */
static int run_digit_classes(const int64_t *off, Py_ssize_t n, const unsigned char *d,
                             int32_t *codes, int64_t **first_out, size_t *n_first) {
    size_t mask = 1023, used = 0, first_cap = 1024, kept_len = 0, kept_cap = 4096;
    const unsigned char *end = d + off[n];
    ClassSlot *slots = malloc(sizeof(ClassSlot) * (mask + 1));
    int64_t *first = malloc(sizeof(int64_t) * first_cap);
    /* The canonical words of each class's first value (up to KEPT_WORDS of them), back to
     * back: a value of an existing class is compared with them, not lexed again. */
    uint64_t *kept = malloc(sizeof(uint64_t) * kept_cap);
    uint64_t words[KEPT_WORDS];
    int rc = 0;
    if (!slots || !first || !kept) rc = -1;
    else for (size_t j = 0; j <= mask; j++) slots[j].head = -1;
    for (Py_ssize_t i = 0; i < n && !rc; i++) {
        const unsigned char *v = d + off[i];
        int64_t len = off[i + 1] - off[i];
        size_t n_words = (size_t)(len + 7) / 8;
        int has_words = len <= 8 * KEPT_WORDS;
        uint64_t h = canon_hash(v, len, end, words);
        size_t j = h & mask;
        int probes = 0;
        for (; slots[j].head >= 0; probes++) {
            ClassSlot *s = &slots[j];
            int64_t head = s->head;
            /* Equal lengths: both keep their words, or neither does. */
            if (s->hash == h && off[head + 1] - off[head] == len
                && (has_words ? !memcmp(kept + s->kept, words, 8 * n_words)
                              : canon_equal(d + off[head], v, len, end)))
                break;
            if (probes >= MAX_PROBES) {
                rc = -4;
                break;
            }
            j = (j + 1) & mask;
        }
        if (rc) break;
        if (slots[j].head >= 0) {
            codes[i] = slots[j].code;
            continue;
        }
        if (used >= (size_t)INT32_MAX) {
            rc = -2;
            break;
        }
        if (used == first_cap) {
            int64_t *f = realloc(first, sizeof(int64_t) * first_cap * 2);
            if (!f) {
                rc = -1;
                break;
            }
            first = f;
            first_cap *= 2;
        }
        int64_t at = -1;
        if (has_words) {
            if (kept_len + n_words > kept_cap) {
                while (kept_len + n_words > kept_cap) kept_cap *= 2;
                uint64_t *k = realloc(kept, sizeof(uint64_t) * kept_cap);
                if (!k) {
                    rc = -1;
                    break;
                }
                kept = k;
            }
            memcpy(kept + kept_len, words, 8 * n_words);
            at = (int64_t)kept_len;
            kept_len += n_words;
        }
        slots[j] = (ClassSlot){h, (int64_t)i, at, (int32_t)used};
        codes[i] = (int32_t)used;
        first[used++] = (int64_t)i;
        if (2 * used > mask + 1) {      /* grow: rehash every class */
            size_t size = (mask + 1) * 2;
            ClassSlot *grown = malloc(sizeof(ClassSlot) * size);
            if (!grown) {
                rc = -1;
                break;
            }
            for (size_t k = 0; k < size; k++) grown[k].head = -1;
            for (size_t k = 0; k <= mask; k++) {
                if (slots[k].head < 0) continue;
                size_t t = slots[k].hash & (size - 1);
                while (grown[t].head >= 0) t = (t + 1) & (size - 1);
                grown[t] = slots[k];
            }
            free(slots);
            slots = grown;
            mask = size - 1;
        }
    }
    free(slots);
    free(kept);
    *first_out = first;
    *n_first = used;
    return rc;
}

static PyObject *digit_classes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data, codes;
    if (!PyArg_ParseTuple(args, "y*y*w*", &offsets, &data, &codes)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = strings_ok(&offsets, &data, "digit_classes");
    if (n < 0) goto done;
    if (codes.len != 4 * n) {
        PyErr_SetString(PyExc_ValueError, "digit_classes: codes must hold n int32");
        goto done;
    }
    int64_t *first = NULL;
    size_t n_first = 0;
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_digit_classes(offsets.buf, n, data.buf, codes.buf, &first, &n_first);
    Py_END_ALLOW_THREADS
    if (rc)
        result = failed_run(rc, "digit_classes: over 2^31 classes");
    else
        result = PyBytes_FromStringAndSize((const char *)first,
                                           (Py_ssize_t)(sizeof(int64_t) * n_first));
    free(first);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    PyBuffer_Release(&codes);
    return result;
}

/* The first 8 bytes at p (fewer: zero-padded) as a number that orders as the bytes do. */
static inline uint64_t order_key(const unsigned char *p, int64_t len, const unsigned char *end) {
    uint64_t w = load_bytes(p, len < 8 ? len : 8, end);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

/* <0, 0, >0 as a orders before, with, after b. */
static int compare_strings(const unsigned char *a, int64_t la, uint64_t ka,
                           const unsigned char *b, int64_t lb, uint64_t kb) {
    if (ka != kb) return ka < kb ? -1 : 1;      /* zero padding: a prefix keys <= */
    int64_t common = la < lb ? la : lb;
    if (common > 8) {
        int c = memcmp(a + 8, b + 8, (size_t)(common - 8));
        if (c) return c;
    }
    return la < lb ? -1 : la > lb ? 1 : 0;
}

/* 0 with *lo, *hi set; 1 when a value is longer than cap. */
static int run_string_bounds(const int64_t *off, Py_ssize_t n, const unsigned char *d,
                             int64_t cap, Py_ssize_t *lo, Py_ssize_t *hi) {
    const unsigned char *end = d + off[n];
    Py_ssize_t imin = 0, imax = 0;
    int64_t lmin = off[1] - off[0], lmax = lmin;
    if (lmin > cap) return 1;
    uint64_t kmin = order_key(d + off[0], lmin, end), kmax = kmin;
    for (Py_ssize_t i = 1; i < n; i++) {
        const unsigned char *p = d + off[i];
        int64_t len = off[i + 1] - off[i];
        if (len > cap) return 1;
        uint64_t k = order_key(p, len, end);
        /* Most values fall strictly between the bounds on their first 8 bytes alone. */
        if (k > kmin && k < kmax) continue;
        if (compare_strings(p, len, k, d + off[imin], lmin, kmin) < 0) {
            imin = i, lmin = len, kmin = k;
        } else if (compare_strings(p, len, k, d + off[imax], lmax, kmax) > 0) {
            imax = i, lmax = len, kmax = k;
        }
    }
    *lo = imin;
    *hi = imax;
    return 0;
}

static PyObject *string_bounds(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data;
    long long cap;
    if (!PyArg_ParseTuple(args, "y*y*L", &offsets, &data, &cap)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = strings_ok(&offsets, &data, "string_bounds");
    if (n < 0) goto done;
    if (n == 0) {
        PyErr_SetString(PyExc_ValueError, "string_bounds: no values");
        goto done;
    }
    Py_ssize_t lo = 0, hi = 0;
    int over;
    Py_BEGIN_ALLOW_THREADS
    over = run_string_bounds(offsets.buf, n, data.buf, (int64_t)cap, &lo, &hi);
    Py_END_ALLOW_THREADS
    if (over) {
        Py_INCREF(Py_None);
        result = Py_None;
    } else {
        result = Py_BuildValue("(nn)", lo, hi);
    }
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

static PyObject *bloom_insert(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer bits, h1, h2;
    unsigned long long m;
    int k, scaled;
    if (!PyArg_ParseTuple(args, "w*Kiy*y*p", &bits, &m, &k, &h1, &h2, &scaled)) return NULL;
    PyObject *result = NULL;
    if (h1.len != h2.len || h1.len % 8 || m == 0 || (unsigned long long)bits.len < (m + 7) / 8
        || k < 1) {
        PyErr_SetString(PyExc_ValueError, "bloom_insert: mismatched arguments");
        goto done;
    }
    unsigned char *bb = bits.buf;
    const uint64_t *a = h1.buf, *b = h2.buf;
    Py_ssize_t n = h1.len / 8;
    Py_BEGIN_ALLOW_THREADS
    if (scaled && m < (1ULL << 32)) {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t g = a[i];
            for (int p = 0; p < k; p++) {
                uint64_t j = ((g >> 32) * m) >> 32;
                bb[j >> 3] |= (unsigned char)(1u << (j & 7));
                g += b[i];
            }
        }
    } else {
        for (Py_ssize_t i = 0; i < n; i++) {
            uint64_t g = a[i];
            for (int p = 0; p < k; p++) {
                uint64_t j = g % m;
                bb[j >> 3] |= (unsigned char)(1u << (j & 7));
                g += b[i];
            }
        }
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&bits);
    PyBuffer_Release(&h1);
    PyBuffer_Release(&h2);
    return result;
}

/* -- membership hashes of tokens ---------------------------------------------------------- */

/* The distinct membership `base`s (membership.py: of a string, before its final mixes) of the
 * tokens met, in an open-addressing set of uint64 (0: empty; a base of 0 is kept aside). */
typedef struct {
    uint64_t *slots;
    size_t mask, n;
    int has_zero;
} BaseSet;

static int bases_init(BaseSet *bs) {
    bs->mask = 4095;
    bs->n = 0;
    bs->has_zero = 0;
    bs->slots = calloc(bs->mask + 1, sizeof(uint64_t));
    return bs->slots ? 0 : -1;
}

static int bases_grow(BaseSet *bs) {
    size_t size = (bs->mask + 1) * 2;
    uint64_t *slots = calloc(size, sizeof(uint64_t));
    if (!slots) return -1;
    for (size_t i = 0; i <= bs->mask; i++) {
        uint64_t b = bs->slots[i];
        if (!b) continue;
        size_t j = (b ^ (b >> 31)) & (size - 1);
        while (slots[j]) j = (j + 1) & (size - 1);
        slots[j] = b;
    }
    free(bs->slots);
    bs->slots = slots;
    bs->mask = size - 1;
    return 0;
}

/* 0 ok, -1 no memory, -4 past MAX_PROBES slots (bases can be chosen to collide). */
static inline int bases_add(BaseSet *bs, uint64_t b) {
    if (!b) {
        bs->n += !bs->has_zero;
        bs->has_zero = 1;
        return 0;
    }
    size_t j = (b ^ (b >> 31)) & bs->mask;
    for (int probes = 0; bs->slots[j]; probes++) {
        if (bs->slots[j] == b) return 0;
        if (probes >= MAX_PROBES) return -4;
        j = (j + 1) & bs->mask;
    }
    bs->slots[j] = b;
    bs->n++;
    return 2 * bs->n > bs->mask + 1 ? bases_grow(bs) : 0;
}

/* The base of the token data[s:s + len] (letters and digits): string_hashes' words of its
 * lower-cased bytes (a letter or digit lower-cases by setting bit 0x20). */
static inline uint64_t token_base(const unsigned char *data, int64_t s, int64_t len,
                                  const unsigned char *end, uint64_t pos, uint64_t len_key) {
    uint64_t acc = 0;
    for (int64_t at = 0, j = 1; at < len; at += 8, j++) {
        int64_t k = len - at < 8 ? len - at : 8;
        uint64_t w = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        w = load_bytes(data + s + at, k, end) | 0x2020202020202020ULL;
        if (k < 8) w &= (1ULL << (8 * k)) - 1;
#else
        (void)end;
        for (int64_t b = 0; b < k; b++) w |= (uint64_t)(data[s + at + b] | 0x20) << (8 * b);
#endif
        acc += mix64(w ^ (pos * (uint64_t)j));
    }
    return acc + (uint64_t)len * len_key;
}

/* run_tokens' scan (the same tokens), each token's base into `bs`. */
static int run_token_bases(BaseSet *bs, const int64_t *offsets, Py_ssize_t n,
                           const unsigned char *data, uint64_t pos, uint64_t len_key) {
    int rc = 0;
    const unsigned char *end = data + offsets[n];
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (Py_ssize_t i = 0; i < n && !rc; i++) {
        int64_t p = offsets[i], e = offsets[i + 1], start = p;
        uint64_t before = 0;
        for (; p < e && !rc; p += 8) {
            int64_t k = e - p < 8 ? e - p : 8;
            uint64_t m = token_bits(load_bytes(data + p, k, end));
            uint64_t prev = (m << 8) | before;
            uint64_t starts = m & ~prev, ends = prev & ~m;
            while (ends && !rc) {
                int b = __builtin_ctzll(ends);
                uint64_t below = starts & ((1ULL << b) - 1);
                if (below) start = p + ((63 - __builtin_clzll(below)) >> 3);
                starts &= ~below;
                int64_t at = p + (b >> 3);
                if (at - start >= 2)
                    rc = bases_add(bs, token_base(data, start, at - start, end, pos, len_key));
                ends &= ends - 1;
            }
            if (starts) start = p + ((63 - __builtin_clzll(starts)) >> 3);
            before = (m >> 56) & 0x80;
        }
        if (before && e - start >= 2 && !rc)
            rc = bases_add(bs, token_base(data, start, e - start, end, pos, len_key));
    }
#else
    for (Py_ssize_t i = 0; i < n && !rc; i++) {
        int64_t p = offsets[i], e = offsets[i + 1];
        while (p < e && !rc) {
            while (p < e && !TOKEN_LOWER[data[p]]) p++;
            int64_t q = p;
            while (q < e && TOKEN_LOWER[data[q]]) q++;
            if (q - p >= 2) rc = bases_add(bs, token_base(data, p, q - p, end, pos, len_key));
            p = q;
        }
    }
#endif
    return rc;
}

static PyObject *token_hashes(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data;
    unsigned long long pos, len_key, k1, k2;
    if (!PyArg_ParseTuple(args, "y*y*KKKK", &offsets, &data, &pos, &len_key, &k1, &k2))
        return NULL;
    PyObject *result = NULL;
    BaseSet bs;
    Py_ssize_t n = strings_ok(&offsets, &data, "token_hashes");
    if (n < 0) goto done;
    if (bases_init(&bs) < 0) {
        PyErr_NoMemory();
        goto done;
    }
    int rc;
    uint64_t *h = NULL;
    Py_BEGIN_ALLOW_THREADS
    rc = run_token_bases(&bs, offsets.buf, n, data.buf, pos, len_key);
    if (!rc) {
        h = malloc(2 * sizeof(uint64_t) * (bs.n ? bs.n : 1));
        if (!h) rc = -1;
    }
    if (!rc) {
        size_t at = 0;
        if (bs.has_zero) {
            h[at] = mix64(k1);
            h[bs.n + at++] = mix64(k2) | 1;
        }
        for (size_t i = 0; i <= bs.mask; i++) {
            uint64_t b = bs.slots[i];
            if (!b) continue;
            h[at] = mix64(b ^ k1);
            h[bs.n + at++] = mix64(b ^ k2) | 1;
        }
    }
    Py_END_ALLOW_THREADS
    if (rc)
        result = failed_run(rc, "token_hashes: too many tokens");
    else
        result = Py_BuildValue("(y#y#)", (const char *)h, (Py_ssize_t)(8 * bs.n),
                               (const char *)(h + bs.n), (Py_ssize_t)(8 * bs.n));
    free(h);
    free(bs.slots);
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    return result;
}

static PyMethodDef methods[] = {
    {"tokens", tokens, METH_VARARGS, "The distinct tokens of string values (see _kernels.c)."},
    {"string_hashes", string_hashes, METH_VARARGS,
     "Membership hashes (version 2) of string values (see _kernels.c)."},
    {"digit_classes", digit_classes, METH_VARARGS,
     "Classes of values equal with every ASCII digit read as 0 (see _kernels.c)."},
    {"string_bounds", string_bounds, METH_VARARGS,
     "Indexes of the smallest and the largest string value (see _kernels.c)."},
    {"bloom_insert", bloom_insert, METH_VARARGS,
     "Set the probes of hashed values in a bloom filter's bits (see _kernels.c)."},
    {"token_hashes", token_hashes, METH_VARARGS,
     "Membership hashes (version 2) of the distinct tokens of string values (see _kernels.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "shoal.format._kernels",
    "Extent statistics kernels in C (see _kernels.c).", -1, methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kernels(void) {
    init_table();
    return PyModule_Create(&module);
}
