/* pytest-opprof numpy capture: the record_shapes entry of one hooked call
 * (numpy_args.c).  Internal to the extension (not cdef text).
 *
 * An entry (the layout of opprof_op_shapes) holds, per argument, one header
 * word (ndim in the low 32 bits, a type number in the high 32) and then:
 *   ndim >= 0              ndim dims: what numpy sees, from an ndarray, a
 *                          numpy or Python scalar (0-d) or a list/tuple of
 *                          numbers and arrays (its shape as np.asarray gives it);
 *   OPPROF_ND_NONE         nothing: not an operand (None, or a keyword
 *                          parameter left at its default);
 *   OPPROF_ND_UNKNOWN      nothing: an operand whose shape is not worked out
 *                          here (an object with __array__, a ragged list):
 *                          no FLOP formula turns it into a number;
 *   OPPROF_ND_VALUE        a count c, then max(c, 0) int64 values: a Python
 *                          int or bool (c = -1, 0-d) or a flat list/tuple of
 *                          at most OPPROF_MAX_SHAPE_DIMS of them (shape [c]);
 *                          the formulas read n=, axis=, sublists from these.
 * The type number is numpy's NPY_TYPES value, or OPPROF_NP_STR_TYPE + k for
 * a recorded str (numpy_hooks.h).
 */
#ifndef OPPROF_NUMPY_ARGS_H
#define OPPROF_NUMPY_ARGS_H

#include <Python.h>

#include "opprof_internal.h"

enum { OPPROF_ND_NONE = -1, OPPROF_ND_UNKNOWN = -2, OPPROF_ND_VALUE = -3 };

/* Words an argument takes in an entry, its header word included. */
static inline int32_t opprof_shape_arg_words(const int64_t *w)
{
    int32_t nd = (int32_t)(uint32_t)(w[0] & 0xffffffff);
    if (nd == OPPROF_ND_VALUE)
        return 2 + (w[1] < 0 ? 1 : (int32_t)w[1]);
    return 1 + (nd > 0 ? nd : 0);
}

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
