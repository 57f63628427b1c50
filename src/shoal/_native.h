/* What shoal's C extensions share (src/shoal/ingest/_scan.c, src/shoal/format/_kernels.c).
 *
 * Strings reach them as Arrow keeps them: n + 1 int64 offsets (rebased to 0, or absolute into
 * the data buffer handed over) and the data bytes. `strings_ok` checks such offsets once,
 * before a kernel releases the GIL and walks them: the kernels then never read outside the
 * data, whatever a caller passes.
 */
#ifndef SHOAL_NATIVE_H
#define SHOAL_NATIVE_H

#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>

/* The number of strings (n) when `offsets` holds n + 1 ascending int64 offsets inside `data`;
 * else -1 with a Python exception set (`who` names the kernel). */
static Py_ssize_t strings_ok(const Py_buffer *offsets, const Py_buffer *data, const char *who) {
    if (offsets->len < 8 || offsets->len % 8) {
        PyErr_Format(PyExc_ValueError, "%s: offsets must be n + 1 int64 values", who);
        return -1;
    }
    const int64_t *off = offsets->buf;
    Py_ssize_t n = offsets->len / 8 - 1;
    if (off[0] < 0 || off[n] > data->len) {
        PyErr_Format(PyExc_IndexError, "%s: offsets outside the data", who);
        return -1;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (off[i + 1] < off[i]) {
            PyErr_Format(PyExc_ValueError, "%s: offsets must ascend", who);
            return -1;
        }
    }
    return n;
}

#endif
