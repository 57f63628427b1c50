/* shoal.format._kernels: extent statistics kernels the numpy versions spend several passes on.
 *
 * tokens(offsets, data) -> (token_offsets, token_data)
 *   The distinct tokens (tokens.py: maximal runs of ASCII letters and digits, at least 2
 *   long, lower-cased; every other byte, non-ASCII included, separates them; a run never
 *   crosses from one value into the next) of the string values data[offsets[i]:offsets[i+1]]
 *   (offsets: int64 buffer, n + 1 entries rebased to 0; data: the bytes they cover), in order
 *   of first appearance, as Arrow string buffers: int32 offsets (bytes), data (bytes).
 *   One pass with a hash set of the tokens seen, the GIL released. `tokenize_array` in
 *   tokens.py stays the reference (numpy) and is tested equal to this.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    int64_t start;   /* offset of the token in `out` */
    int32_t len;
    uint64_t hash;
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

/* Adds the lower-cased token `tok` (len bytes) if new. 0 ok, -1 no memory, -2 too big. */
static int set_add(TokenSet *ts, const char *tok, int32_t len, uint64_t h) {
    size_t j = h & ts->mask;
    while (ts->slots[j].len >= 0) {
        Slot *s = &ts->slots[j];
        if (s->hash == h && s->len == len && memcmp(ts->out + s->start, tok, (size_t)len) == 0)
            return 0;
        j = (j + 1) & ts->mask;
    }
    if (ts->out_len + (size_t)len > (size_t)INT32_MAX) return -2;
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
    memcpy(ts->out + ts->out_len, tok, (size_t)len);
    ts->slots[j] = (Slot){(int64_t)ts->out_len, len, h};
    ts->out_len += (size_t)len;
    ts->offsets[++ts->n] = (int32_t)ts->out_len;
    if (2 * ts->n > ts->mask + 1) return set_grow(ts);
    return 0;
}

static int run_tokens(TokenSet *ts, const int64_t *offsets, Py_ssize_t n,
                      const unsigned char *data, Py_ssize_t data_len) {
    char buf[256];
    char *tok = buf;
    size_t tok_cap = sizeof(buf);
    for (Py_ssize_t i = 0; i < n; i++) {
        int64_t s = offsets[i], e = offsets[i + 1];
        if (s < 0 || e < s || e > data_len) {
            if (tok != buf) free(tok);
            return -3;
        }
        int64_t p = s;
        while (p < e) {
            while (p < e && !TOKEN_LOWER[data[p]]) p++;
            int64_t q = p;
            uint64_t h = 1469598103934665603ULL;
            while (q < e && TOKEN_LOWER[data[q]]) {
                unsigned char c = TOKEN_LOWER[data[q]];
                h = (h ^ c) * 1099511628211ULL;
                q++;
            }
            int64_t len = q - p;
            if (len >= 2) {
                if ((size_t)len > tok_cap) {
                    size_t cap = tok_cap * 2;
                    while (cap < (size_t)len) cap *= 2;
                    char *t = malloc(cap);
                    if (!t) {
                        if (tok != buf) free(tok);
                        return -1;
                    }
                    if (tok != buf) free(tok);
                    tok = t;
                    tok_cap = cap;
                }
                if (len > INT32_MAX) {
                    if (tok != buf) free(tok);
                    return -2;
                }
                for (int64_t k = 0; k < len; k++) tok[k] = (char)TOKEN_LOWER[data[p + k]];
                h ^= h >> 29;  /* spread the high bits into the low ones the mask keeps */
                int rc = set_add(ts, tok, (int32_t)len, h);
                if (rc) {
                    if (tok != buf) free(tok);
                    return rc;
                }
            }
            p = q;
        }
    }
    if (tok != buf) free(tok);
    return 0;
}

static PyObject *tokens(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer offsets, data;
    if (!PyArg_ParseTuple(args, "y*y*", &offsets, &data)) return NULL;
    PyObject *result = NULL;
    TokenSet ts;
    if (offsets.len < 8 || offsets.len % 8) {
        PyErr_SetString(PyExc_ValueError, "tokens: offsets must be int64, n + 1 of them");
        goto done;
    }
    if (set_init(&ts) < 0) {
        set_free(&ts);
        PyErr_NoMemory();
        goto done;
    }
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = run_tokens(&ts, offsets.buf, offsets.len / 8 - 1, data.buf, data.len);
    Py_END_ALLOW_THREADS
    if (rc == -1) PyErr_NoMemory();
    else if (rc == -2) PyErr_SetString(PyExc_OverflowError, "tokens: over 2 GiB of tokens");
    else if (rc == -3) PyErr_SetString(PyExc_IndexError, "tokens: offsets outside the data");
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

static PyMethodDef methods[] = {
    {"tokens", tokens, METH_VARARGS, "The distinct tokens of string values (see _kernels.c)."},
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
