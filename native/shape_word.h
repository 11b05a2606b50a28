/* pytest-opprof native core: the record_shapes entry of one op, as the hooks
 * write it (numpy_hooks.c, numpy_args.c, core.c) and the string tables read
 * it (strtab.c).  Internal to the extension (not cdef text).
 *
 * An entry is entry[0], the argument count, then per argument one header
 * word (ndim in the low 32 bits, a type number in the high 32) and then:
 *   ndim >= 0              ndim dims: what numpy sees, from an ndarray, a
 *                          numpy or Python scalar (0-d) or a list/tuple of
 *                          numbers and arrays (its shape as np.asarray gives it);
 *   OPPROF_ND_NONE         nothing: not an operand (None, or a keyword
 *                          parameter left at its default);
 *   OPPROF_ND_UNKNOWN      nothing: an operand whose shape is not worked out
 *                          (an object with __array__, a ragged list): no
 *                          FLOP formula turns it into a number;
 *   OPPROF_ND_VALUE        a count c, then max(c, 0) int64 values: a Python
 *                          int or bool (c = -1, 0-d) or a flat list/tuple of
 *                          at most OPPROF_MAX_SHAPE_DIMS of them (shape [c]);
 *                          the formulas read n=, axis=, sublists from these.
 * The type number is numpy's NPY_TYPES value (-1 when unknown), or
 * OPPROF_NP_STR_TYPE + k for a recorded str (numpy_hooks.h).
 */
#ifndef OPPROF_SHAPE_WORD_H
#define OPPROF_SHAPE_WORD_H

#include <stdint.h>

#define OPPROF_MAX_SHAPE_ARGS 8 /* arguments recorded per op (einsum's sublist form) */
#define OPPROF_MAX_SHAPE_DIMS 6 /* dimensions recorded per argument */

/* Words in the longest entry: every argument an OPPROF_ND_VALUE list. */
#define OPPROF_SHAPE_ENTRY_WORDS (1 + OPPROF_MAX_SHAPE_ARGS * (2 + OPPROF_MAX_SHAPE_DIMS))

enum { OPPROF_ND_NONE = -1, OPPROF_ND_UNKNOWN = -2, OPPROF_ND_VALUE = -3 };

/* An argument's header word. */
static inline int64_t opprof_shape_word(int32_t nd, int32_t type_num)
{
    return (int64_t)((uint64_t)(uint32_t)nd | ((uint64_t)(uint32_t)type_num << 32));
}

static inline int32_t opprof_shape_word_nd(int64_t word) { return (int32_t)(uint32_t)word; }

static inline int32_t opprof_shape_word_type(int64_t word) { return (int32_t)(word >> 32); }

/* Words the argument at w takes, its header word included. */
static inline int32_t opprof_shape_arg_words(const int64_t *w)
{
    int32_t nd = opprof_shape_word_nd(w[0]);
    if (nd == OPPROF_ND_VALUE)
        return 2 + (w[1] < 0 ? 1 : (int32_t)w[1]);
    return 1 + (nd > 0 ? nd : 0);
}

#endif
