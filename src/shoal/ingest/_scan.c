/* shoal.ingest._scan: one pass over the object lines of an NDJSON body, without the GIL.
 *
 * What `_lines.raw_pass` does with msgspec (validate every line, pick out the raw JSON text
 * of some top-level keys, find the keys the schema lacks in order of first appearance), in
 * C, so that it runs beside Arrow's JSON reader instead of holding the GIL, and so that the
 * picked values land in Arrow binary buffers directly instead of one Python object per
 * value. No library offers this (validation plus raw value spans of chosen keys, GIL
 * released): simdjson bindings, orjson and msgspec all build Python objects.
 *
 * scan(body, starts, ends, lines, declared, kept, discover, keep_unknown, max_unknown)
 *   body      bytes-like, the whole body
 *   starts    int64 buffer: byte offset of each line of the body
 *   ends      int64 buffer: end of each line (its newline excluded)
 *   lines     int64 buffer: the lines to scan (indexes into starts/ends), ascending
 *   declared  list of bytes: the keys the pass knows (UTF-8), in declaration order
 *   kept      list of int, one per declared key: 0 skip it, 1 keep its raw values, or a
 *             typed column (2 string, 3 int, 4 long, 5 real, 6 bool, 7 timestamp, -N
 *             vector(N); 9, 10, 11: a timestamp whose epoch numbers are in microseconds,
 *             milliseconds, seconds) whose values the pass converts itself (see "Typed
 *             columns" below)
 *   discover  bool: record the keys outside `declared` (else they are skipped)
 *   keep_unknown bool: keep the raw values of the first `max_unknown` discovered keys
 *   max_unknown int
 * returns (status, columns, discovered), or None when keys collide past MAX_PROBES slots of
 * its hash table (keys can be chosen to: the hash is not keyed); the caller then gives the body
 * to msgspec, whose dicts hash with a secret key.
 *   status    bytes, one per scanned line: 0 ok, 1 invalid (not one valid JSON object by
 *             RFC 8259), 2 slow (valid, but holds a discovered key past `max_unknown`),
 *             3 unsure (this scanner does not decide: nesting deeper than MAX_DEPTH, a
 *             key that holds a quote, a backslash or a control character once unescaped);
 *             the caller asks msgspec about 1 and 3. Other keys written with escapes
 *             (`"gr\u00f6\u00dfe"`, what Python's json.dumps writes by default) are
 *             matched by their unescaped text, as msgspec matches them.
 *   columns   list of (name, offsets, present, data, valid, flags) per kept key: declared
 *             kept keys in declaration order, then discovered kept keys in discovery order;
 *             offsets int32 (n+1) or None, present uint8 (n: the key was there, `null`
 *             included), data the concatenated raw texts (raw keys) or the typed values;
 *             valid and flags uint8 (n) for typed keys, None for raw ones. A line that is
 *             not ok has every key absent.
 *   discovered list of bytes: keys outside `declared` in order of first appearance over the
 *             ok and slow lines (lines top to bottom, keys left to right); keys of invalid or
 *             unsure lines are not counted (msgspec would not have decoded those lines).
 *
 * index(body) -> (starts, ends, kind)
 *   The lines of a body as `_lines.LineIndex.build` finds them: int64 start and end (its
 *   newline excluded) of each line, and per line 0 blank (only space, tab, CR), 1 object (a
 *   `{` first and a `}` last once space, tab and CR are stripped, and valid UTF-8), 2 bad
 *   (not shaped as an object), 3 shaped as an object but not valid UTF-8.
 *   A newline ends a line; a body that ends with one has no empty line after it. One pass
 *   (the arrays grow as lines are found), the GIL released.
 *
 * count_lines(body) -> int
 *   The number of newline bytes in `body` (memchr, the GIL released; `bytes.count` holds it).
 *
 * rfc3339(offsets, data, ns, ok) -> None
 *   Epoch nanoseconds of RFC 3339 timestamps, `_values.rfc3339_ns` for each string
 *   data[offsets[i]:offsets[i+1]] (offsets int64, n + 1): the shape of `RFC3339_PATTERN`
 *   (`T`/`t` or a space, 1 to 9 fraction digits, `Z`/`z`, an offset `+hh:mm` or no zone
 *   (UTC)), month, day (leap years included), hour, minute, second and offset in range,
 *   the result within int64. Writes
 *   ns[i] (int64) and ok[i] (uint8: 1 accepted, 0 not; ns is then 0) into writable buffers.
 *
 * Typed columns: the values `_values.convert` would store, for the values this pass is sure
 * of; any other present, non-null value is flagged (flags[i] = 1, valid[i] = 0) and the
 * caller sends its line to the per-line path, which words the error (or converts the rare
 * value this pass leaves alone). `null` is present and not valid.
 *   string     a JSON string, unescaped (data + int32 offsets); a number, `true` or `false`
 *              as its text (a number of at most 100 characters: `jsonlimits`); objects and
 *              arrays are flagged.
 *   int, long  an integer literal (no fraction or exponent) in range: int32 / int64 values.
 *   real       a number, by strtod in the C locale (correctly rounded, as Python's float()),
 *              finite: float64 values. A literal of 64 characters or more is flagged.
 *   bool       `true` / `false`: one uint8 per row.
 *   timestamp  an integer literal in int64 (epoch nanoseconds), or a string without escapes
 *              that `rfc3339` (below) accepts: int64 values. In a coarser unit (codes 9-11)
 *              a number `-?digits[.digits]` (no exponent, at most 18 integer digits) is
 *              scaled to nanoseconds, the fraction rounded half to even, as
 *              `_values.epoch_ns`; one past int64 or spelt otherwise is flagged.
 *   vector(N)  an array of exactly N numbers, each by strtod as `real` then rounded to the
 *              nearest float32 (as numpy's float32() of Python's float()), none past
 *              float32's range: N float32 values per row.
 * Fixed-width values of rows that are not valid are 0; a string row that is not valid is
 * empty.
 *
 * JSON: RFC 8259 as msgspec reads it: whitespace is space, tab, CR, LF; strings hold no raw
 * byte below 0x20; escapes are \" \\ \/ \b \f \n \r \t \uXXXX with UTF-16 surrogates paired
 * (a high one followed by an escaped low one); numbers -?(0|[1-9]d*)(.d+)?([eE][+-]?d+)?;
 * duplicate keys: the last one wins. UTF-8 validity is the caller's (LineIndex) business.
 */
#include "_native.h"
#include <locale.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

enum { ST_OK = 0, ST_INVALID = 1, ST_SLOW = 2, ST_UNSURE = 3 };
enum { T_SKIP = 0, T_RAW = 1, T_STRING = 2, T_INT = 3, T_LONG = 4, T_REAL = 5, T_BOOL = 6,
       T_TIMESTAMP = 7, T_LAST = 7, T_VECTOR = 8 /* `kept` says -N */,
       K_TIMESTAMP_US = 9, K_TIMESTAMP_MS = 10, K_TIMESTAMP_S = 11 /* `kept` codes only */ };
#define MAX_VECTOR_DIM (1 << 16)
/* The smallest double that rounds to infinity as a float32: FLT_MAX plus half its ulp (a tie
 * rounds to even, away from FLT_MAX's odd mantissa). */
#define F32_OVERFLOW 0x1.ffffffp+127
#define MAX_NUMBER_CHARS 100  /* shoal.types.jsonlimits.MAX_NUMBER_CHARS */
#define INT_MAX_CHARS 20      /* "-9223372036854775808": longer is out of every range */
#define REAL_MAX_CHARS 63     /* longer literals go the per-line path */
#define MAX_DEPTH 128
#define MAX_PROBES 128  /* hash slots one key lookup may visit (see keyset_find) */

/* -- keys ------------------------------------------------------------------------------ */

typedef struct {
    const char *name;  /* owned (a copy), declared or discovered */
    Py_ssize_t len;
    int col;           /* kept column, or -1 */
    int over_cap;      /* a discovered key past max_unknown: its lines are slow */
} Key;

typedef struct {
    Key *keys;
    Py_ssize_t n, cap;
    Py_ssize_t *table;  /* open addressing: index into keys, or -1 */
    Py_ssize_t mask;
} KeySet;

static uint64_t hash_bytes(const char *p, Py_ssize_t n) {
    uint64_t h = 1469598103934665603ULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        h ^= (unsigned char)p[i];
        h *= 1099511628211ULL;
    }
    return h;
}

static int keyset_init(KeySet *ks, Py_ssize_t hint) {
    Py_ssize_t size = 64;
    while (size < 4 * hint) size <<= 1;
    ks->n = 0;
    ks->cap = hint > 8 ? hint : 8;
    ks->keys = malloc(sizeof(Key) * ks->cap);
    ks->table = malloc(sizeof(Py_ssize_t) * size);
    if (!ks->keys || !ks->table) return -1;
    for (Py_ssize_t i = 0; i < size; i++) ks->table[i] = -1;
    ks->mask = size - 1;
    return 0;
}

static void keyset_free(KeySet *ks) {
    if (ks->keys) {
        for (Py_ssize_t i = 0; i < ks->n; i++) free((void *)ks->keys[i].name);
    }
    free(ks->keys);
    free(ks->table);
}

/* The key's index, -1 if absent, or -2 past MAX_PROBES slots: keys chosen to collide (the
 * hash is not keyed) cannot make a body cost quadratic time; the caller gives the body to
 * msgspec instead. */
static Py_ssize_t keyset_find(const KeySet *ks, const char *p, Py_ssize_t n, uint64_t h) {
    Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)ks->mask);
    for (int probes = 0; probes < MAX_PROBES; probes++) {
        Py_ssize_t k = ks->table[slot];
        if (k < 0) return -1;
        if (ks->keys[k].len == n && memcmp(ks->keys[k].name, p, (size_t)n) == 0) return k;
        slot = (slot + 1) & ks->mask;
    }
    return -2;
}

static int keyset_grow_table(KeySet *ks) {
    Py_ssize_t size = (ks->mask + 1) * 2;
    Py_ssize_t *table = malloc(sizeof(Py_ssize_t) * size);
    if (!table) return -1;
    for (Py_ssize_t i = 0; i < size; i++) table[i] = -1;
    for (Py_ssize_t k = 0; k < ks->n; k++) {
        Py_ssize_t slot = (Py_ssize_t)(hash_bytes(ks->keys[k].name, ks->keys[k].len)
                                       & (uint64_t)(size - 1));
        while (table[slot] >= 0) slot = (slot + 1) & (size - 1);
        table[slot] = k;
    }
    free(ks->table);
    ks->table = table;
    ks->mask = size - 1;
    return 0;
}

/* Adds a copy of a key (the caller checked it is absent); returns its index, -1 (no memory)
 * or -2 (past MAX_PROBES slots, see keyset_find). */
static Py_ssize_t keyset_add(KeySet *ks, const char *p, Py_ssize_t n, uint64_t h) {
    if (2 * (ks->n + 1) > ks->mask + 1 && keyset_grow_table(ks) < 0) return -1;
    Py_ssize_t slot = (Py_ssize_t)(h & (uint64_t)ks->mask);
    for (int probes = 0; ks->table[slot] >= 0; probes++) {
        if (probes >= MAX_PROBES) return -2;
        slot = (slot + 1) & ks->mask;
    }
    if (ks->n == ks->cap) {
        Key *keys = realloc(ks->keys, sizeof(Key) * ks->cap * 2);
        if (!keys) return -1;
        ks->keys = keys;
        ks->cap *= 2;
    }
    char *copy = malloc(n ? (size_t)n : 1);
    if (!copy) return -1;
    memcpy(copy, p, (size_t)n);
    Py_ssize_t k = ks->n++;
    ks->keys[k] = (Key){copy, n, -1, 0};
    ks->table[slot] = k;
    return k;
}

/* -- kept columns ---------------------------------------------------------------------- */

typedef struct {
    Py_ssize_t key;     /* index into the key set */
    int type;           /* T_RAW or a typed column */
    int dim;            /* T_VECTOR: components per row */
    int scale_digits;   /* T_TIMESTAMP: epoch numbers are in 10**-(9 - this) seconds */
    int32_t *offsets;   /* n + 1 (raw and string columns) */
    uint8_t *present;   /* n */
    uint8_t *valid;     /* n (typed columns) */
    uint8_t *flags;     /* n (typed columns) */
    char *data;         /* raw texts, strings, or n fixed-width values */
    size_t len, cap;
    const char *span;   /* this line's value (last one wins), NULL if absent */
    Py_ssize_t span_len;
    int span_escaped;   /* the value is a string holding a backslash */
} Col;

static size_t type_width(int type, int dim) {
    switch (type) {
    case T_VECTOR: return 4 * (size_t)dim;
    case T_INT: return 4;
    case T_LONG: case T_REAL: case T_TIMESTAMP: return 8;
    case T_BOOL: return 1;
    default: return 0;  /* raw and string: offsets + data */
    }
}

typedef struct {
    Col *cols;
    int n, cap;
    Py_ssize_t rows;    /* lines per column */
} Cols;

static int cols_add(Cols *cs, Py_ssize_t key, int type, int dim) {
    if (cs->n == cs->cap) {
        int cap = cs->cap ? cs->cap * 2 : 16;
        Col *cols = realloc(cs->cols, sizeof(Col) * (size_t)cap);
        if (!cols) return -1;
        cs->cols = cols;
        cs->cap = cap;
    }
    Col *c = &cs->cols[cs->n];
    memset(c, 0, sizeof(Col));
    c->key = key;
    c->type = type;
    c->dim = dim;
    size_t rows = (size_t)cs->rows ? (size_t)cs->rows : 1, width = type_width(type, dim);
    c->present = calloc(rows, 1);   /* rows not reached yet stay absent */
    int ok = c->present != NULL;
    if (width) {
        c->data = calloc(rows, width);
        c->len = c->cap = (size_t)cs->rows * width;
        ok = ok && c->data;
    } else {
        c->offsets = calloc((size_t)cs->rows + 1, sizeof(int32_t));
        ok = ok && c->offsets;
    }
    if (type != T_RAW) {
        c->valid = calloc(rows, 1);
        c->flags = calloc(rows, 1);
        ok = ok && c->valid && c->flags;
    }
    if (!ok) {
        free(c->offsets);
        free(c->present);
        free(c->valid);
        free(c->flags);
        free(c->data);
        return -1;
    }
    return cs->n++;
}

static void cols_free(Cols *cs) {
    for (int i = 0; i < cs->n; i++) {
        free(cs->cols[i].offsets);
        free(cs->cols[i].present);
        free(cs->cols[i].valid);
        free(cs->cols[i].flags);
        free(cs->cols[i].data);
    }
    free(cs->cols);
}

/* Room for `more` bytes in a raw or string column's data: 0, -1 (no memory), -2 (the column
 * would pass 2 GiB, what int32 offsets address). */
static int reserve(Col *c, size_t more) {
    size_t need = c->len + more;
    if (need > (size_t)INT32_MAX) return -2;
    if (need > c->cap) {
        size_t cap = c->cap ? c->cap : 4096;
        while (cap < need) cap *= 2;
        char *data = realloc(c->data, cap);
        if (!data) return -1;
        c->data = data;
        c->cap = cap;
    }
    return 0;
}

static int one_rfc3339(const unsigned char *p, int64_t len, int64_t *ns);
static inline int hexval(unsigned char c);
static locale_t c_locale;  /* strtod_l: a '.' decimal point whatever the process's locale */

static void put_utf8(char **out, unsigned u) {
    unsigned char *o = (unsigned char *)*out;
    if (u < 0x80) {
        *o++ = (unsigned char)u;
    } else if (u < 0x800) {
        *o++ = (unsigned char)(0xC0 | (u >> 6));
        *o++ = (unsigned char)(0x80 | (u & 0x3F));
    } else if (u < 0x10000) {
        *o++ = (unsigned char)(0xE0 | (u >> 12));
        *o++ = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (u & 0x3F));
    } else {
        *o++ = (unsigned char)(0xF0 | (u >> 18));
        *o++ = (unsigned char)(0x80 | ((u >> 12) & 0x3F));
        *o++ = (unsigned char)(0x80 | ((u >> 6) & 0x3F));
        *o++ = (unsigned char)(0x80 | (u & 0x3F));
    }
    *out = (char *)o;
}

static unsigned hex4(const unsigned char *p) {
    return (unsigned)(hexval(p[0]) << 12 | hexval(p[1]) << 8 | hexval(p[2]) << 4 | hexval(p[3]));
}

/* The text of a JSON string (validated by skip_string: escapes well formed, surrogates
 * paired) unescaped at `o`; returns its length. `v` is at the opening quote, `n` counts both
 * quotes. The unescaped text is never longer than the escaped one. */
static size_t unescape(const unsigned char *v, Py_ssize_t n, char *o) {
    char *start = o;
    const unsigned char *p = v + 1, *end = v + n - 1;
    while (p < end) {
        const unsigned char *q = memchr(p, '\\', (size_t)(end - p));
        if (!q) q = end;
        memcpy(o, p, (size_t)(q - p));
        o += q - p;
        if (q == end) break;
        p = q + 2;
        switch (q[1]) {
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            unsigned u = hex4(p);
            p += 4;
            if (u >= 0xD800 && u <= 0xDBFF) {  /* paired with the low one that follows */
                u = 0x10000 + ((u - 0xD800) << 10) + (hex4(p + 2) - 0xDC00);
                p += 6;
            }
            put_utf8(&o, u);
            break;
        }
        default: *o++ = (char)q[1]; break;  /* " \ / */
        }
    }
    return (size_t)(o - start);
}

/* A JSON string's text (`escaped`: it holds a backslash, as `skip_string` found). */
static int put_string(Col *c, const unsigned char *v, Py_ssize_t n, int escaped) {
    int rc = reserve(c, (size_t)n);
    if (rc) return rc;
    if (escaped) {
        c->len += unescape(v, n, c->data + c->len);
    } else {
        memcpy(c->data + c->len, v + 1, (size_t)(n - 2));
        c->len += (size_t)(n - 2);
    }
    return 0;
}

static int put_raw(Col *c, const char *v, Py_ssize_t n) {
    int rc = reserve(c, (size_t)n);
    if (rc) return rc;
    memcpy(c->data + c->len, v, (size_t)n);
    c->len += (size_t)n;
    return 0;
}

/* An integer literal (a valid JSON number) of at most INT_MAX_CHARS characters. */
static int integer_of(const unsigned char *v, Py_ssize_t n, __int128 *out) {
    if (n > INT_MAX_CHARS) return 0;
    Py_ssize_t i = v[0] == '-';
    __int128 x = 0;
    for (; i < n; i++) {
        unsigned d = (unsigned)v[i] - '0';
        if (d > 9) return 0;  /* a fraction or an exponent */
        x = x * 10 + d;
    }
    *out = v[0] == '-' ? -x : x;
    return 1;
}

/* An epoch number (valid JSON) in a unit of 10**digits nanoseconds (digits 3, 6 or 9) as
 * nanoseconds: `-?int[.frac]`, the fraction rounded half to even. 0 for an exponent, more
 * than 18 integer digits, or a result past int64 (the per-line path words those). */
static int scaled_epoch(const unsigned char *v, Py_ssize_t n, int digits, int64_t *out) {
    Py_ssize_t i = v[0] == '-', start = i;
    __int128 whole = 0, scale = 1;
    for (int k = 0; k < digits; k++) scale *= 10;
    while (i < n && v[i] >= '0' && v[i] <= '9') {
        if (i - start >= 18) return 0;
        whole = whole * 10 + (v[i++] - '0');
    }
    __int128 head = 0;
    int taken = 0, next = 0, beyond = 0;
    if (i < n && v[i] == '.') {
        for (i++; i < n && v[i] >= '0' && v[i] <= '9'; i++) {
            int d = v[i] - '0';
            if (taken < digits) {
                head = head * 10 + d;
                taken++;
            } else if (taken == digits) {
                next = d;
                taken++;
            } else if (d) {
                beyond = 1;
            }
        }
    }
    if (i != n) return 0;  /* an exponent */
    for (; taken < digits; taken++) head *= 10;
    __int128 mag = whole * scale + head;
    if (next > 5 || (next == 5 && (beyond || (head & 1)))) mag++;
    __int128 ns = v[0] == '-' ? -mag : mag;
    if (ns < (__int128)INT64_MIN || ns > (__int128)INT64_MAX) return 0;
    *out = (int64_t)ns;
    return 1;
}

/* A number literal (valid JSON) at p, its length through *n: its double by strtod in the C
 * locale; 0 if longer than REAL_MAX_CHARS. */
static int real_of(const unsigned char *p, Py_ssize_t n, double *out) {
    if (n > REAL_MAX_CHARS) return 0;
    char text[REAL_MAX_CHARS + 1];
    memcpy(text, p, (size_t)n);
    text[n] = 0;
    *out = strtod_l(text, NULL, c_locale);
    return 1;
}

/* A vector(N) value: `[` N numbers `]` (valid JSON) into the row's N float32 slots. */
static int vector_of(Col *c, Py_ssize_t row, const unsigned char *v, Py_ssize_t n) {
    float *out = (float *)c->data + (size_t)row * (size_t)c->dim;
    const unsigned char *p = v + 1, *end = v + n - 1;  /* inside the brackets */
    int count = 0;
    for (;;) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
        if (p >= end || count == c->dim) break;
        if (!(*p == '-' || (*p >= '0' && *p <= '9'))) return 0;
        const unsigned char *q = p;
        while (q < end && ((*q >= '0' && *q <= '9') || *q == '-' || *q == '+' || *q == '.'
                           || *q == 'e' || *q == 'E'))
            q++;
        double d;
        if (!real_of(p, q - p, &d) || !(fabs(d) < F32_OVERFLOW)) return 0;
        out[count++] = (float)d;
        p = q;
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n')) p++;
        if (p < end && *p == ',') p++;
    }
    return count == c->dim && p >= end;
}

/* Converts one present value of a typed column at `row`: 0, or -1 / -2 as `reserve`.
 * `escaped`: a string value holds a backslash. */
static int put_typed(Col *c, Py_ssize_t row, const unsigned char *v, Py_ssize_t n,
                     int escaped) {
    unsigned char first = v[0];
    if (first == 'n') return 0;  /* null: present, not valid */
    int number = first == '-' || (first >= '0' && first <= '9');
    int good = 0;
    __int128 x;
    switch (c->type) {
    case T_STRING: {
        int rc = 0;
        if (first == '"') rc = put_string(c, v, n, escaped);
        else if ((number && n <= MAX_NUMBER_CHARS) || first == 't' || first == 'f')
            rc = put_raw(c, (const char *)v, n);
        else break;
        if (rc) return rc;
        good = 1;
        break;
    }
    case T_INT:
        if (number && integer_of(v, n, &x) && x >= INT32_MIN && x <= INT32_MAX) {
            ((int32_t *)c->data)[row] = (int32_t)x;
            good = 1;
        }
        break;
    case T_LONG:
        if (number && integer_of(v, n, &x) && x >= INT64_MIN && x <= INT64_MAX) {
            ((int64_t *)c->data)[row] = (int64_t)x;
            good = 1;
        }
        break;
    case T_REAL: {
        double d;
        if (number && real_of(v, n, &d) && isfinite(d)) {
            ((double *)c->data)[row] = d;
            good = 1;
        }
        break;
    }
    case T_VECTOR:
        good = first == '[' && vector_of(c, row, v, n);
        if (!good) memset((float *)c->data + (size_t)row * (size_t)c->dim, 0,
                          4 * (size_t)c->dim);
        break;
    case T_BOOL:
        if (first == 't' || first == 'f') {
            ((uint8_t *)c->data)[row] = first == 't';
            good = 1;
        }
        break;
    case T_TIMESTAMP:
        if (number && c->scale_digits) {
            int64_t ns;
            good = scaled_epoch(v, n, c->scale_digits, &ns);
            if (good) ((int64_t *)c->data)[row] = ns;
        } else if (number) {
            good = integer_of(v, n, &x) && x >= INT64_MIN && x <= INT64_MAX;
            if (good) ((int64_t *)c->data)[row] = (int64_t)x;
        } else if (first == '"' && !escaped) {
            int64_t ns;
            good = one_rfc3339(v + 1, n - 2, &ns);
            if (good) ((int64_t *)c->data)[row] = ns;
        }
        break;
    }
    c->valid[row] = (uint8_t)good;
    c->flags[row] = (uint8_t)!good;
    return 0;
}

/* Row `row` is done: append the picked value of each column (absent if `ok` is false). */
static int cols_commit(Cols *cs, Py_ssize_t row, int ok) {
    for (int i = 0; i < cs->n; i++) {
        Col *c = &cs->cols[i];
        if (ok && c->span) {
            int rc = c->type == T_RAW ? put_raw(c, c->span, c->span_len)
                     : put_typed(c, row, (const unsigned char *)c->span, c->span_len,
                                 c->span_escaped);
            if (rc) return rc;
            c->present[row] = 1;
        }
        if (c->offsets) c->offsets[row + 1] = (int32_t)c->len;
        c->span = NULL;
    }
    return 0;
}

/* -- JSON ------------------------------------------------------------------------------ */

typedef struct {
    const char *key;    /* in the body; NULL for an escaped key, which is in the arena */
    Py_ssize_t key_len;
    size_t key_off;     /* escaped key: its unescaped text's offset in the arena */
    const char *val;
    Py_ssize_t val_len;
    int val_escaped;    /* the value is a string holding a backslash */
} Field;

typedef struct {       /* the unescaped keys of one line */
    char *buf;
    size_t len, cap;
} Arena;

typedef struct {
    const unsigned char *p, *end;
    int depth;
    int unsure;
} Parser;

static inline void skip_ws(Parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\r'
                               || *ps->p == '\n'))
        ps->p++;
}

static inline int hexval(unsigned char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c |= 0x20;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

static int read_u16(Parser *ps, unsigned *out) {  /* at the 4 hex digits after \u */
    if (ps->end - ps->p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval(ps->p[i]);
        if (h < 0) return -1;
        v = (v << 4) | (unsigned)h;
    }
    ps->p += 4;
    *out = v;
    return 0;
}

/* The first byte at or after p that ends a run of plain string bytes: a quote, a backslash
 * or a byte below 0x20 (end if none). SSE2 (every x86-64) looks at 16 bytes at a time. */
static inline const unsigned char *plain_run(const unsigned char *p, const unsigned char *end) {
#ifdef __SSE2__
    const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
    const __m128i control = _mm_set1_epi8(0x1F);
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i stop = _mm_or_si128(
            _mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
            _mm_cmpeq_epi8(_mm_min_epu8(v, control), v));  /* unsigned v <= 0x1F */
        int mask = _mm_movemask_epi8(stop);
        if (mask) return p + __builtin_ctz((unsigned)mask);
        p += 16;
    }
#endif
    while (p < end && *p >= 0x20 && *p != '"' && *p != '\\') p++;
    return p;
}

/* At the opening quote; leaves p after the closing one. 0 ok, -1 invalid. `escaped` tells
 * whether the string held a backslash. */
static int skip_string(Parser *ps, int *escaped) {
    const unsigned char *p = ps->p + 1, *end = ps->end;
    *escaped = 0;
    for (;;) {
        p = plain_run(p, end);
        if (p >= end || *p < 0x20) return -1;
        if (*p == '"') {
            ps->p = p + 1;
            return 0;
        }
        *escaped = 1;
        p++;
        if (p >= end) return -1;
        switch (*p) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p++;
            break;
        case 'u': {
            unsigned u;
            ps->p = p + 1;
            if (read_u16(ps, &u) < 0) return -1;
            p = ps->p;
            if (u >= 0xDC00 && u <= 0xDFFF) return -1;      /* a lone low surrogate */
            if (u >= 0xD800 && u <= 0xDBFF) {                /* must pair with a low one */
                if (end - p < 6 || p[0] != '\\' || p[1] != 'u') return -1;
                ps->p = p + 2;
                if (read_u16(ps, &u) < 0) return -1;
                if (u < 0xDC00 || u > 0xDFFF) return -1;
                p = ps->p;
            }
            break;
        }
        default:
            return -1;
        }
    }
}

static int skip_number(Parser *ps) {
    const unsigned char *p = ps->p, *end = ps->end;
    if (p < end && *p == '-') p++;
    if (p >= end) return -1;
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < end && *p >= '0' && *p <= '9') p++;
    } else {
        return -1;
    }
    if (p < end && *p == '.') {
        p++;
        if (p >= end || !(*p >= '0' && *p <= '9')) return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        if (p >= end || !(*p >= '0' && *p <= '9')) return -1;
        while (p < end && *p >= '0' && *p <= '9') p++;
    }
    ps->p = p;
    return 0;
}

static int skip_literal(Parser *ps, const char *word, Py_ssize_t n) {
    if (ps->end - ps->p < n || memcmp(ps->p, word, (size_t)n) != 0) return -1;
    ps->p += n;
    return 0;
}

static int skip_value(Parser *ps);

static int skip_container(Parser *ps, unsigned char close) {
    if (++ps->depth > MAX_DEPTH) {
        ps->unsure = 1;
        return -1;
    }
    ps->p++;
    skip_ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        ps->depth--;
        return 0;
    }
    for (;;) {
        if (close == '}') {
            int escaped;
            if (ps->p >= ps->end || *ps->p != '"' || skip_string(ps, &escaped) < 0) return -1;
            skip_ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return -1;
            ps->p++;
            skip_ws(ps);
        }
        if (skip_value(ps) < 0) return -1;
        skip_ws(ps);
        if (ps->p >= ps->end) return -1;
        if (*ps->p == ',') {
            ps->p++;
            skip_ws(ps);
            continue;
        }
        if (*ps->p == close) {
            ps->p++;
            ps->depth--;
            return 0;
        }
        return -1;
    }
}

static int skip_value(Parser *ps) {
    if (ps->p >= ps->end) return -1;
    int escaped;
    switch (*ps->p) {
    case '"': return skip_string(ps, &escaped);
    case '{': return skip_container(ps, '}');
    case '[': return skip_container(ps, ']');
    case 't': return skip_literal(ps, "true", 4);
    case 'f': return skip_literal(ps, "false", 5);
    case 'n': return skip_literal(ps, "null", 4);
    default: return skip_number(ps);
    }
}

/* A key written with escapes, unescaped into the arena: 0, -1 (no memory), or 1 when it
 * holds a quote, a backslash or a control character once unescaped (msgspec cannot name
 * such a key as a field: the line is left to it). */
static int arena_key(Arena *a, const unsigned char *k, Py_ssize_t n, Field *f) {
    if (a->len + (size_t)n > a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap < a->len + (size_t)n) cap *= 2;
        char *buf = realloc(a->buf, cap);
        if (!buf) return -1;
        a->buf = buf;
        a->cap = cap;
    }
    size_t len = unescape(k, n, a->buf + a->len);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)a->buf[a->len + i];
        if (ch < 0x20 || ch == '"' || ch == '\\') return 1;
    }
    f->key = NULL;
    f->key_off = a->len;
    f->key_len = (Py_ssize_t)len;
    a->len += len;
    return 0;
}

/* One line: its top-level fields into `fields` (grown as needed). Returns a status. */
static int parse_line(const unsigned char *s, const unsigned char *e, Field **fields,
                      Py_ssize_t *n_fields, Py_ssize_t *cap, Arena *arena) {
    Parser ps = {s, e, 0, 0};
    *n_fields = 0;
    arena->len = 0;
    skip_ws(&ps);
    if (ps.p >= ps.end || *ps.p != '{') return ST_INVALID;
    ps.p++;
    ps.depth = 1;
    skip_ws(&ps);
    if (ps.p < ps.end && *ps.p == '}') {
        ps.p++;
    } else {
        for (;;) {
            if (ps.p >= ps.end || *ps.p != '"') return ST_INVALID;
            const unsigned char *k = ps.p + 1;
            int escaped;
            if (skip_string(&ps, &escaped) < 0) return ST_INVALID;
            const unsigned char *k_end = ps.p - 1;
            skip_ws(&ps);
            if (ps.p >= ps.end || *ps.p != ':') return ST_INVALID;
            ps.p++;
            skip_ws(&ps);
            const unsigned char *v = ps.p;
            int val_escaped = 0;    /* a string value tells (its columns skip a search) */
            if ((v < ps.end && *v == '"' ? skip_string(&ps, &val_escaped)
                                         : skip_value(&ps)) < 0)
                return ps.unsure ? ST_UNSURE : ST_INVALID;
            if (*n_fields == *cap) {
                Py_ssize_t c = *cap * 2;
                Field *f = realloc(*fields, sizeof(Field) * (size_t)c);
                if (!f) return -1;
                *fields = f;
                *cap = c;
            }
            Field *f = &(*fields)[(*n_fields)++];
            *f = (Field){(const char *)k, k_end - k, 0, (const char *)v, ps.p - v,
                         val_escaped};
            if (escaped) {  /* matched as msgspec matches it: by its unescaped text */
                int rc = arena_key(arena, k - 1, k_end - k + 2, f);
                if (rc < 0) return -1;
                if (rc > 0) ps.unsure = 1;
            }
            skip_ws(&ps);
            if (ps.p >= ps.end) return ST_INVALID;
            if (*ps.p == ',') {
                ps.p++;
                skip_ws(&ps);
                continue;
            }
            if (*ps.p == '}') {
                ps.p++;
                break;
            }
            return ST_INVALID;
        }
    }
    skip_ws(&ps);
    if (ps.p != ps.end) return ST_INVALID;  /* trailing data */
    return ps.unsure ? ST_UNSURE : ST_OK;
}

/* -- the pass -------------------------------------------------------------------------- */

typedef struct {
    const unsigned char *body;
    Py_ssize_t body_len;
    const int64_t *starts, *ends, *lines;
    Py_ssize_t n_lines, n_index;
    int discover, keep_unknown;
    Py_ssize_t max_unknown;
    KeySet keys;
    Cols cols;
    uint8_t *status;
    Py_ssize_t *discovered;   /* key indexes, in order */
    Py_ssize_t n_discovered, cap_discovered;
    Py_ssize_t n_unknown_declared;
} Pass;

/* Returns 0, -1 (no memory), -2 (a column over 2 GiB), -3 (a line outside the body). */
static int run_pass(Pass *ps) {
    Py_ssize_t cap = 64, n_fields = 0;
    Field *fields = malloc(sizeof(Field) * (size_t)cap);
    if (!fields) return -1;
    Arena arena = {NULL, 0, 0};
    int rc = 0;
    for (Py_ssize_t r = 0; r < ps->n_lines; r++) {
        int64_t li = ps->lines[r];
        if (li < 0 || li >= ps->n_index) { rc = -3; break; }
        int64_t s = ps->starts[li], e = ps->ends[li];
        if (s < 0 || e < s || e > ps->body_len) { rc = -3; break; }
        int st = parse_line(ps->body + s, ps->body + e, &fields, &n_fields, &cap, &arena);
        if (st < 0) { rc = -1; break; }
        if (st == ST_OK) {
            for (Py_ssize_t i = 0; i < n_fields; i++) {
                Field *f = &fields[i];
                if (!f->key) f->key = arena.buf + f->key_off;  /* the arena has stopped moving */
                uint64_t h = hash_bytes(f->key, f->key_len);
                Py_ssize_t k = keyset_find(&ps->keys, f->key, f->key_len, h);
                if (k == -2) { rc = -4; break; }
                if (k < 0) {
                    if (!ps->discover) continue;
                    k = keyset_add(&ps->keys, f->key, f->key_len, h);
                    if (k < 0) { rc = k == -2 ? -4 : -1; break; }
                    if (ps->n_discovered == ps->cap_discovered) {
                        Py_ssize_t c = ps->cap_discovered ? ps->cap_discovered * 2 : 16;
                        Py_ssize_t *d = realloc(ps->discovered, sizeof(Py_ssize_t) * (size_t)c);
                        if (!d) { rc = -1; break; }
                        ps->discovered = d;
                        ps->cap_discovered = c;
                    }
                    ps->discovered[ps->n_discovered++] = k;
                    if (ps->n_unknown_declared >= ps->max_unknown) {
                        ps->keys.keys[k].over_cap = 1;
                    } else {
                        ps->n_unknown_declared++;
                        if (ps->keep_unknown) {
                            int c = cols_add(&ps->cols, k, T_RAW, 0);
                            if (c < 0) { rc = -1; break; }
                            ps->keys.keys[k].col = c;
                        }
                    }
                }
                Key *key = &ps->keys.keys[k];
                if (key->over_cap) st = ST_SLOW;
                if (key->col >= 0) {
                    Col *c = &ps->cols.cols[key->col];
                    c->span = f->val;
                    c->span_len = f->val_len;
                    c->span_escaped = f->val_escaped;
                }
            }
            if (rc) break;
        }
        ps->status[r] = (uint8_t)st;
        rc = cols_commit(&ps->cols, r, st == ST_OK);
        if (rc) break;
    }
    free(fields);
    free(arena.buf);
    return rc;
}

static PyObject *bytes_of(const void *p, size_t n) {
    return PyBytes_FromStringAndSize(n ? (const char *)p : "", (Py_ssize_t)n);
}

/* A read-only buffer object that owns memory the pass allocated: the columns reach Python
 * (numpy, Arrow's py_buffer) without a copy. Copying them into bytes held the GIL for about
 * 12 ms per 32 MB chunk (py-spy --gil on `shoal ingest`). */
typedef struct {
    PyObject_HEAD
    void *data;
    Py_ssize_t len;
} Owned;

static int owned_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Owned *o = (Owned *)self;
    return PyBuffer_FillInfo(view, self, o->data ? o->data : (void *)"", o->len, 1, flags);
}

static void owned_dealloc(PyObject *self) {
    free(((Owned *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs owned_as_buffer = {owned_getbuffer, NULL};

static PyTypeObject OwnedType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "shoal.ingest._scan.Owned",
    .tp_doc = "Memory of a scan's result, read-only (the buffer protocol).",
    .tp_basicsize = sizeof(Owned),
    .tp_dealloc = owned_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_as_buffer = &owned_as_buffer,
};

/* `*p` (n bytes, of malloc) as an Owned object; *p is NULL afterwards, whether this
 * succeeds or not (on failure the memory is freed and NULL returned with an exception). */
static PyObject *own(void *p, size_t n) {
    void **at = p;
    Owned *o = PyObject_New(Owned, &OwnedType);
    if (!o) {
        free(*at);
        *at = NULL;
        return NULL;
    }
    o->data = *at;
    o->len = (Py_ssize_t)n;
    *at = NULL;
    return (PyObject *)o;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer body, starts, ends, lines;
    PyObject *declared, *kept;
    int discover, keep_unknown;
    Py_ssize_t max_unknown;
    if (!PyArg_ParseTuple(args, "y*y*y*y*O!O!ppn", &body, &starts, &ends, &lines,
                          &PyList_Type, &declared, &PyList_Type, &kept, &discover,
                          &keep_unknown, &max_unknown))
        return NULL;
    PyObject *result = NULL;
    Pass ps;
    memset(&ps, 0, sizeof(ps));
    Py_ssize_t n_declared = PyList_GET_SIZE(declared);
    if (starts.len != ends.len || starts.len % 8 || lines.len % 8
        || PyList_GET_SIZE(kept) != n_declared) {
        PyErr_SetString(PyExc_ValueError, "scan: mismatched arguments");
        goto done_buffers;
    }
    ps.body = body.buf;
    ps.body_len = body.len;
    ps.starts = starts.buf;
    ps.ends = ends.buf;
    ps.lines = lines.buf;
    ps.n_index = starts.len / 8;
    ps.n_lines = lines.len / 8;
    ps.discover = discover;
    ps.keep_unknown = keep_unknown;
    ps.max_unknown = max_unknown;
    ps.cols.rows = ps.n_lines;
    if (keyset_init(&ps.keys, n_declared) < 0) goto nomem;
    ps.status = malloc(ps.n_lines ? (size_t)ps.n_lines : 1);
    if (!ps.status) goto nomem;
    for (Py_ssize_t i = 0; i < n_declared; i++) {
        PyObject *name = PyList_GET_ITEM(declared, i);
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "scan: declared keys must be bytes");
            goto done;
        }
        const char *p = PyBytes_AS_STRING(name);
        Py_ssize_t n = PyBytes_GET_SIZE(name);
        uint64_t h = hash_bytes(p, n);
        Py_ssize_t k = keyset_find(&ps.keys, p, n, h);
        /* owned copies: nothing borrowed from Python is read once the GIL is released */
        if (k == -1) k = keyset_add(&ps.keys, p, n, h);
        if (k == -2) goto give_up;
        if (k < 0) goto nomem;
        long want = PyLong_AsLong(PyList_GET_ITEM(kept, i));
        if (want == -1 && PyErr_Occurred()) goto done;
        if ((want > T_LAST && (want < K_TIMESTAMP_US || want > K_TIMESTAMP_S))
            || want < -MAX_VECTOR_DIM) {
            PyErr_SetString(PyExc_ValueError, "scan: a kept code out of range");
            goto done;
        }
        if (want && ps.keys.keys[k].col < 0) {
            int scaled = want >= K_TIMESTAMP_US;
            int c = want < 0 ? cols_add(&ps.cols, k, T_VECTOR, (int)-want)
                             : cols_add(&ps.cols, k, scaled ? T_TIMESTAMP : (int)want, 0);
            if (c < 0) goto nomem;
            if (scaled) ps.cols.cols[c].scale_digits = 3 * (int)(want - K_TIMESTAMP_US + 1);
            ps.keys.keys[k].col = c;
        }
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_pass(&ps);
    Py_END_ALLOW_THREADS
    if (rc == -1) goto nomem;
    if (rc == -2) {
        PyErr_SetString(PyExc_OverflowError, "scan: over 2 GiB of raw JSON in one column");
        goto done;
    }
    if (rc == -3) {
        PyErr_SetString(PyExc_IndexError, "scan: a line outside the body");
        goto done;
    }
    if (rc == -4) goto give_up;
    PyObject *status = bytes_of(ps.status, (size_t)ps.n_lines);  /* small: kept as bytes */
    PyObject *columns = PyList_New(ps.cols.n);
    PyObject *found = PyList_New(ps.n_discovered);
    if (!status || !columns || !found) goto fail_out;
    for (int i = 0; i < ps.cols.n; i++) {
        Col *c = &ps.cols.cols[i];
        Key *k = &ps.keys.keys[c->key];
        size_t n = (size_t)ps.n_lines;
        PyObject *none = Py_None;
        if (c->offsets && c->cap > c->len + (1 << 20)) {  /* grown by doubling: give back */
            char *data = realloc(c->data, c->len ? c->len : 1);
            if (data) c->data = data;
        }
        PyObject *item = Py_BuildValue(
            "(NNNNNN)", bytes_of(k->name, (size_t)k->len),
            c->offsets ? own(&c->offsets, sizeof(int32_t) * (n + 1)) : Py_NewRef(none),
            own(&c->present, n), own(&c->data, c->len),
            c->valid ? own(&c->valid, n) : Py_NewRef(none),
            c->flags ? own(&c->flags, n) : Py_NewRef(none));
        if (!item) goto fail_out;
        PyList_SET_ITEM(columns, i, item);
    }
    for (Py_ssize_t i = 0; i < ps.n_discovered; i++) {
        Key *k = &ps.keys.keys[ps.discovered[i]];
        PyObject *name = bytes_of(k->name, (size_t)k->len);
        if (!name) goto fail_out;
        PyList_SET_ITEM(found, i, name);
    }
    result = Py_BuildValue("(NNN)", status, columns, found);
    goto done;
fail_out:
    Py_XDECREF(status);
    Py_XDECREF(columns);
    Py_XDECREF(found);
    goto done;
give_up:  /* keys that collide past MAX_PROBES: msgspec takes the body (None) */
    Py_INCREF(Py_None);
    result = Py_None;
    goto done;
nomem:
    PyErr_NoMemory();
done:
    keyset_free(&ps.keys);
    cols_free(&ps.cols);
    free(ps.status);
    free(ps.discovered);
done_buffers:
    PyBuffer_Release(&body);
    PyBuffer_Release(&starts);
    PyBuffer_Release(&ends);
    PyBuffer_Release(&lines);
    return result;
}

/* -- the line index ------------------------------------------------------------------- */

/* Strict UTF-8 (as Python's decoder): no overlong forms, no surrogates, nothing past
 * U+10FFFF. */
static int valid_utf8(const unsigned char *p, const unsigned char *end) {
    while (p < end) {
#ifdef __SSE2__
        while (end - p >= 16
               && !_mm_movemask_epi8(_mm_loadu_si128((const __m128i *)p)))  /* all ASCII */
            p += 16;
        if (p >= end) break;
#endif
        unsigned char c = *p;
        if (c < 0x80) {
            p++;
            continue;
        }
        Py_ssize_t need;
        unsigned char lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else return 0;
        if (end - p <= need) return 0;
        if (p[1] < lo || p[1] > hi) return 0;
        for (Py_ssize_t k = 2; k <= need; k++)
            if (p[k] < 0x80 || p[k] > 0xBF) return 0;
        p += need + 1;
    }
    return 1;
}

static uint8_t line_kind(const unsigned char *s, const unsigned char *e) {
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\r')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r')) e--;
    if (s == e) return 0;
    if (*s != '{' || e[-1] != '}') return 2;
    return 1;
}

static PyObject *index_lines(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "y*", &body)) return NULL;
    const unsigned char *b = body.buf, *end = b + body.len;
    Py_ssize_t n = 0;
    PyObject *result = NULL;
    int64_t *starts = NULL, *ends = NULL;
    uint8_t *kind = NULL;
    /* One pass: the arrays start at a guess of 128 bytes a line and double when full. */
    size_t cap = (size_t)body.len / 128 + 16;
    int grown = 1;
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *s = b;
    while (s < end) {
        if ((size_t)n == cap || !starts) {
            if (starts) cap *= 2;
            int64_t *st = realloc(starts, sizeof(int64_t) * cap);
            if (st) starts = st;
            int64_t *en = realloc(ends, sizeof(int64_t) * cap);
            if (en) ends = en;
            uint8_t *kd = realloc(kind, cap);
            if (kd) kind = kd;
            if (!st || !en || !kd) {
                grown = 0;
                break;
            }
        }
        const unsigned char *nl = memchr(s, '\n', (size_t)(end - s));
        const unsigned char *e = nl ? nl : end;    /* a last line without its newline */
        starts[n] = s - b;
        ends[n] = e - b;
        uint8_t k = line_kind(s, e);
        if (k == 1 && !valid_utf8(s, e)) k = 3;
        kind[n++] = k;
        if (!nl) break;
        s = nl + 1;
    }
    Py_END_ALLOW_THREADS
    if (!grown) {
        PyErr_NoMemory();
        goto done;
    }
    static const char none[1] = "";   /* no lines: empty bytes, not None */
    result = Py_BuildValue("(y#y#y#)", starts ? (const char *)starts : none,
                           (Py_ssize_t)(8 * n), ends ? (const char *)ends : none,
                           (Py_ssize_t)(8 * n), kind ? (const char *)kind : none, n);
done:
    free(starts);
    free(ends);
    free(kind);
    PyBuffer_Release(&body);
    return result;
}

static PyObject *count_lines(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer body;
    if (!PyArg_ParseTuple(args, "y*", &body)) return NULL;
    Py_ssize_t n = 0;
    Py_BEGIN_ALLOW_THREADS
    const unsigned char *p = body.buf, *end = p + body.len;
    while (p < end && (p = memchr(p, '\n', (size_t)(end - p))) != NULL) {
        n++;
        p++;
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&body);
    return PyLong_FromSsize_t(n);
}

/* -- RFC 3339 ---------------------------------------------------------------------------- */

static inline int digits(const unsigned char *p, int n, int64_t *out) {
    int64_t v = 0;
    for (int i = 0; i < n; i++) {
        unsigned d = (unsigned)p[i] - '0';
        if (d > 9) return 0;
        v = v * 10 + d;
    }
    *out = v;
    return 1;
}

static int64_t floor_div(int64_t a, int64_t b) {
    int64_t q = a / b;
    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = floor_div(y, 400);
    int64_t yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + doe - 719468;
}

static int one_rfc3339(const unsigned char *p, int64_t len, int64_t *ns) {
    static const int month_days[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int64_t y, mo, d, hh, mi, ss, frac = 0, oh = 0, om = 0, sign = 1;
    if (len < 19 || len > 35) return 0;
    if (!digits(p, 4, &y) || p[4] != '-' || !digits(p + 5, 2, &mo) || p[7] != '-'
        || !digits(p + 8, 2, &d) || (p[10] != 'T' && p[10] != 't' && p[10] != ' ')
        || !digits(p + 11, 2, &hh)
        || p[13] != ':' || !digits(p + 14, 2, &mi) || p[16] != ':' || !digits(p + 17, 2, &ss))
        return 0;
    int64_t i = 19;
    if (i < len && p[i] == '.') {
        int64_t start = ++i;
        while (i < len && (unsigned)p[i] - '0' <= 9) i++;
        int64_t n = i - start;
        if (n < 1 || n > 9) return 0;
        digits(p + start, (int)n, &frac);
        for (int64_t k = n; k < 9; k++) frac *= 10;
    }
    if (i == len) {
        /* no zone: UTC */
    } else if (p[i] == 'Z' || p[i] == 'z') {
        i++;
    } else if (p[i] == '+' || p[i] == '-') {
        sign = p[i] == '+' ? 1 : -1;
        if (len - i < 6 || !digits(p + i + 1, 2, &oh) || p[i + 3] != ':'
            || !digits(p + i + 4, 2, &om))
            return 0;
        i += 6;
    } else {
        return 0;
    }
    if (i != len) return 0;
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    if (mo < 1 || mo > 12 || d < 1 || d > month_days[mo] + (mo == 2 && leap) || hh > 23
        || mi > 59 || ss > 59 || oh > 23 || om > 59)
        return 0;
    int64_t sec = days_from_civil(y, mo, d) * 86400 + hh * 3600 + mi * 60 + ss
                  - sign * (oh * 3600 + om * 60);
    __int128 total = (__int128)sec * 1000000000 + frac;
    if (total < (__int128)INT64_MIN || total > (__int128)INT64_MAX) return 0;
    *ns = (int64_t)total;
    return 1;
}

static PyObject *rfc3339(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data, ns, ok;
    if (!PyArg_ParseTuple(args, "y*y*w*w*", &offsets, &data, &ns, &ok)) return NULL;
    PyObject *result = NULL;
    Py_ssize_t n = strings_ok(&offsets, &data, "rfc3339");
    if (n < 0) goto done;
    if (ns.len != 8 * n || ok.len != n) {
        PyErr_SetString(PyExc_ValueError, "rfc3339: ns must hold n int64, ok n uint8");
        goto done;
    }
    const int64_t *off = offsets.buf;
    int64_t *out = ns.buf;
    uint8_t *good = ok.buf;
    const unsigned char *d = data.buf;
    Py_BEGIN_ALLOW_THREADS
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t v = 0;
        good[i] = (uint8_t)one_rfc3339(d + off[i], off[i + 1] - off[i], &v);
        out[i] = good[i] ? v : 0;
    }
    Py_END_ALLOW_THREADS
    Py_INCREF(Py_None);
    result = Py_None;
done:
    PyBuffer_Release(&offsets);
    PyBuffer_Release(&data);
    PyBuffer_Release(&ns);
    PyBuffer_Release(&ok);
    return result;
}

static PyMethodDef methods[] = {
    {"rfc3339", rfc3339, METH_VARARGS, "Epoch nanoseconds of RFC 3339 strings (see _scan.c)."},
    {"count_lines", count_lines, METH_VARARGS, "The newline bytes of a body (see _scan.c)."},
    {"index", index_lines, METH_VARARGS, "The lines of an NDJSON body and their kinds (see "
                                         "the module comment in _scan.c)."},
    {"scan", scan, METH_VARARGS, "One pass over the object lines of an NDJSON body (see the "
                                 "module comment in _scan.c)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "shoal.ingest._scan",
    "NDJSON lines validated and raw values picked out without the GIL (see _scan.c).", -1,
    methods, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__scan(void) {
    c_locale = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
    if (PyType_Ready(&OwnedType) < 0) return NULL;
    return PyModule_Create(&module);
}
