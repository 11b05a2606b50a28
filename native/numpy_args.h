/* pytest-opprof numpy capture: the record_shapes entry of one hooked call
 * (numpy_args.c), in the layout of shape_word.h.  Internal to the extension
 * (not cdef text).
 */
#ifndef OPPROF_NUMPY_ARGS_H
#define OPPROF_NUMPY_ARGS_H

#include <Python.h>

#include "opprof_internal.h"

/* numpy's C API in this translation unit; 0 or -1 with a Python error set. */
int np_args_ready(void);

/* Index of a str in the process-lifetime string table, -1 when full. */
int64_t np_string_index(PyObject *s);

/* Writes one argument at p (the ndarray case inline in the hooks is the
 * same as np_put_array); returns the words written. */
int np_put_array(int64_t *p, uint16_t *flags, PyObject *o);
int np_put_other(int64_t *p, uint16_t *flags, PyObject *o, int strings);

/* A call with keyword arguments: self (an ndarray method's array) first,
 * then positional arguments, then keyword arguments placed at their index
 * in `params` (a tuple of str), at most max_args in all.  Vectorcall
 * keywords: names in kwnames, values after args[n]; a METH_KEYWORDS call
 * passes its dict as kwdict.  `strings` records str arguments (einsum
 * subscripts, convolve's mode).  GIL held. */
void np_args_capture_keywords(opprof_thread *t, PyObject *self, PyObject *const *args, Py_ssize_t n,
                              PyObject *kwnames, PyObject *kwdict, PyObject *params, int strings,
                              int max_args);

/* Arguments a hook records unless opprof_numpy_set_params asks for more:
 * the operands of nearly every op, and what FLOP formulas read. */
#define OPPROF_NP_DEFAULT_ARGS 4

#endif
