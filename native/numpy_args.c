/* Native numpy capture: what a hooked call's arguments look like to numpy.
 *
 * FLOP formulas need the shape numpy will work on, not the Python type the
 * caller passed: np.add(list40, list40) adds 40 numbers and np.sum([x, x],
 * axis=0) reduces a (2, n) array.  Lists and tuples of numbers and arrays are
 * measured here, in C, by the shape np.asarray would give them (one type
 * check per element, far below the conversion numpy then does); anything
 * else that numpy might convert is recorded as "unknown", never as 0-d.
 * Small Python ints (n=, axis=, einsum sublists) are recorded by value, and
 * keyword arguments land at their parameter's index, so a formula sees
 * fft(x, n=2048) as fft(x, 2048).  Entry layout: shape_word.h.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include <numpy/arrayobject.h>

#include "numpy_args.h"
#include "numpy_hooks.h"

/* Elements a list walk looks at before it calls the shape unknown. */
#define NP_LIST_VISITS (1L << 20)
/* Nesting a list walk follows (numpy's own limit is 64 dimensions). */
#define NP_LIST_DEPTH 32

int np_args_ready(void)
{
    if (PyArray_API != NULL)
        return 0;
    return _import_array();
}

/* ---- strings (einsum subscripts, convolve modes) ----------------------- */

#define OPPROF_NP_STRS 4096
#define OPPROF_NP_STR_TABLE 8192

static char *g_strs[OPPROF_NP_STRS];
static uint32_t g_n_strs;
static uint32_t g_str_index[OPPROF_NP_STR_TABLE]; /* k + 1, 0 = empty */

int64_t np_string_index(PyObject *s)
{
    Py_ssize_t len;
    const char *utf8 = PyUnicode_AsUTF8AndSize(s, &len);
    Py_hash_t h = utf8 ? PyObject_Hash(s) : -1;
    if (h == -1) {
        PyErr_Clear();
        return -1;
    }
    size_t i = (size_t)h & (OPPROF_NP_STR_TABLE - 1);
    for (; g_str_index[i] != 0; i = (i + 1) & (OPPROF_NP_STR_TABLE - 1)) {
        const char *known = g_strs[g_str_index[i] - 1];
        if ((Py_ssize_t)strlen(known) == len && memcmp(known, utf8, (size_t)len) == 0)
            return g_str_index[i] - 1;
    }
    if (g_n_strs == OPPROF_NP_STRS)
        return -1;
    char *copy = malloc((size_t)len + 1);
    if (copy == NULL)
        return -1;
    memcpy(copy, utf8, (size_t)len + 1);
    g_strs[g_n_strs] = copy;
    g_str_index[i] = ++g_n_strs;
    return g_n_strs - 1;
}

const char *opprof_numpy_string_get(uint32_t k) { return k < g_n_strs ? g_strs[k] : NULL; }

/* ---- lists and tuples ---------------------------------------------------- */

typedef struct np_seq {
    int levels; /* list/tuple levels above the leaves */
    int nd;     /* levels + the leaf arrays' dims */
    npy_intp dims[NP_LIST_DEPTH];
    int type_num; /* promoted over the leaves, -1 before the first */
    long visits;
    int all_ints; /* every leaf a Python int or bool */
    int all_bools;
} np_seq;

static inline int np_is_seq(PyObject *o) { return PyList_Check(o) || PyTuple_Check(o); }

/* numpy's type for one leaf, -1 when numpy would not make it a number. */
static int np_leaf_type(PyObject *o)
{
    if (PyBool_Check(o))
        return NPY_BOOL;
    if (PyLong_Check(o))
        return NPY_LONG;
    if (PyFloat_Check(o))
        return NPY_DOUBLE;
    if (PyComplex_Check(o))
        return NPY_CDOUBLE;
    if (PyArray_IsScalar(o, Generic)) {
        PyArray_Descr *d = PyArray_DescrFromScalar(o);
        if (d == NULL) {
            PyErr_Clear(); /* the hooked call must start with no error set */
            return -1;
        }
        int type_num = d->type_num;
        Py_DECREF(d);
        return type_num;
    }
    return -1;
}

/* The type an array built from leaves of types a and b gets. */
static int np_promote(int a, int b)
{
    if (a < 0 || a == b)
        return b;
    PyArray_Descr *da = PyArray_DescrFromType(a), *db = PyArray_DescrFromType(b);
    PyArray_Descr *p = da && db ? PyArray_PromoteTypes(da, db) : NULL;
    int type_num = p ? p->type_num : -1;
    Py_XDECREF(da);
    Py_XDECREF(db);
    Py_XDECREF(p);
    if (type_num < 0)
        PyErr_Clear();
    return type_num;
}

/* The shape the first elements describe: list levels, then the first leaf's dims. */
static int np_seq_probe(PyObject *o, np_seq *s)
{
    while (np_is_seq(o)) {
        if (s->levels == NP_LIST_DEPTH)
            return -1;
        Py_ssize_t n = PySequence_Fast_GET_SIZE(o);
        s->dims[s->levels++] = n;
        if (n == 0)
            break;
        o = PySequence_Fast_GET_ITEM(o, 0);
    }
    s->nd = s->levels;
    if (PyArray_Check(o) && s->dims[s->levels - 1] != 0) {
        PyArrayObject *a = (PyArrayObject *)o;
        if (s->nd + PyArray_NDIM(a) > NP_LIST_DEPTH)
            return -1;
        for (int i = 0; i < PyArray_NDIM(a); i++)
            s->dims[s->nd++] = PyArray_DIMS(a)[i];
    }
    return 0;
}

/* Every element fits the probed shape (else numpy makes a ragged or object
 * array, or raises): -1 then.  Collects the leaves' promoted type. */
static int np_seq_check(PyObject *o, np_seq *s, int level)
{
    if (++s->visits > NP_LIST_VISITS)
        return -1;
    if (level < s->levels) {
        if (!np_is_seq(o) || PySequence_Fast_GET_SIZE(o) != s->dims[level])
            return -1;
        PyObject **items = PySequence_Fast_ITEMS(o);
        for (Py_ssize_t i = 0; i < s->dims[level]; i++)
            if (np_seq_check(items[i], s, level + 1) < 0)
                return -1;
        return 0;
    }
    int type_num;
    if (s->nd > s->levels) {
        if (!PyArray_Check(o))
            return -1;
        PyArrayObject *a = (PyArrayObject *)o;
        if (PyArray_NDIM(a) != s->nd - s->levels ||
            memcmp(PyArray_DIMS(a), &s->dims[s->levels],
                   (size_t)PyArray_NDIM(a) * sizeof(npy_intp)) != 0)
            return -1;
        type_num = PyArray_TYPE(a);
        s->all_ints = 0;
    } else {
        if ((type_num = np_leaf_type(o)) < 0)
            return -1;
        s->all_ints &= PyLong_Check(o);
        s->all_bools &= PyBool_Check(o);
    }
    s->type_num = np_promote(s->type_num, type_num);
    return s->type_num < 0 ? -1 : 0;
}

/* ---- one argument ---------------------------------------------------------- */

/* A flat list/tuple of at most OPPROF_MAX_SHAPE_DIMS Python ints, by value. */
static int np_put_int_list(int64_t *p, PyObject *o, const np_seq *s)
{
    PyObject **items = PySequence_Fast_ITEMS(o);
    for (Py_ssize_t i = 0; i < s->dims[0]; i++) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(items[i], &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        p[2 + i] = v;
    }
    p[0] = opprof_shape_word(OPPROF_ND_VALUE, s->all_bools ? NPY_BOOL : NPY_LONG);
    p[1] = s->dims[0];
    return 2 + (int)s->dims[0];
}

/* Writes one argument at p; returns the words written. */
static int np_put_seq(int64_t *p, uint16_t *flags, PyObject *o)
{
    np_seq s = {.type_num = -1, .all_ints = 1, .all_bools = 1};
    if (np_seq_probe(o, &s) < 0 || np_seq_check(o, &s, 0) < 0) {
        p[0] = opprof_shape_word(OPPROF_ND_UNKNOWN, -1);
        return 1;
    }
    if (s.type_num < 0) /* empty: numpy's default */
        s.type_num = NPY_DOUBLE;
    if (s.nd == 1 && s.all_ints && s.dims[0] > 0 && s.dims[0] <= OPPROF_MAX_SHAPE_DIMS) {
        int words = np_put_int_list(p, o, &s);
        if (words)
            return words;
    }
    int nd = s.nd;
    if (nd > OPPROF_MAX_SHAPE_DIMS) {
        nd = OPPROF_MAX_SHAPE_DIMS;
        *flags |= OPPROF_FLAG_TRUNCATED;
    }
    p[0] = opprof_shape_word(nd, s.type_num);
    for (int i = 0; i < nd; i++)
        p[1 + i] = s.dims[i];
    return 1 + nd;
}

int np_put_array(int64_t *p, uint16_t *flags, PyObject *o)
{
    PyArrayObject *a = (PyArrayObject *)o;
    int nd = PyArray_NDIM(a);
    if (nd > OPPROF_MAX_SHAPE_DIMS) {
        nd = OPPROF_MAX_SHAPE_DIMS;
        *flags |= OPPROF_FLAG_TRUNCATED;
    }
    p[0] = opprof_shape_word(nd, PyArray_TYPE(a));
    memcpy(&p[1], PyArray_DIMS(a), (size_t)nd * sizeof(int64_t));
    return 1 + nd;
}

/* One argument that is not an ndarray (arrays are written inline by the hooks). */
int np_put_other(int64_t *p, uint16_t *flags, PyObject *o, int strings)
{
    if (o == NULL || o == Py_None) {
        p[0] = opprof_shape_word(OPPROF_ND_NONE, -1);
        return 1;
    }
    if (PyArray_Check(o))
        return np_put_array(p, flags, o);
    if (PyLong_Check(o)) {
        int overflow = 0;
        long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow || (v == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            p[0] = opprof_shape_word(0, NPY_LONG);
            return 1;
        }
        p[0] = opprof_shape_word(OPPROF_ND_VALUE, PyBool_Check(o) ? NPY_BOOL : NPY_LONG);
        p[1] = -1;
        p[2] = v;
        return 3;
    }
    if (np_is_seq(o))
        return np_put_seq(p, flags, o);
    int64_t k;
    if (strings && PyUnicode_Check(o) && (k = np_string_index(o)) >= 0) {
        p[0] = opprof_shape_word(0, OPPROF_NP_STR_TYPE + (int)k);
        return 1;
    }
    int type_num = np_leaf_type(o);
    p[0] = opprof_shape_word(type_num < 0 ? OPPROF_ND_UNKNOWN : 0, type_num);
    return 1;
}

/* ---- one call ---------------------------------------------------------------- */

/* Index of keyword `name` among `params`, -1 when it is not one of them. */
static Py_ssize_t np_param_index(PyObject *params, PyObject *name)
{
    Py_ssize_t n = PyTuple_GET_SIZE(params);
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyTuple_GET_ITEM(params, i) == name)
            return i;
    /* Names from a call site are interned like the parameters: rarely reached. */
    for (Py_ssize_t i = 0; i < n; i++)
        if (PyUnicode_Compare(PyTuple_GET_ITEM(params, i), name) == 0)
            return i;
    PyErr_Clear();
    return -1;
}

/* slots[first + i] is the i-th parameter (slots[0] is self when first is 1). */
static void np_place_keyword(PyObject **slots, Py_ssize_t *count, uint16_t *flags, PyObject *params,
                             Py_ssize_t first, Py_ssize_t n_positional, int max_args,
                             PyObject *name, PyObject *value)
{
    Py_ssize_t i = np_param_index(params, name);
    if (i < n_positional) /* not a parameter we record, or given twice (numpy raises) */
        return;
    if (first + i >= max_args) {
        *flags |= OPPROF_FLAG_TRUNCATED;
        return;
    }
    slots[first + i] = value;
    if (first + i >= *count)
        *count = first + i + 1;
}

void np_args_capture_keywords(opprof_thread *t, PyObject *self, PyObject *const *args, Py_ssize_t n,
                              PyObject *kwnames, PyObject *kwdict, PyObject *params, int strings,
                              int max_args)
{
    PyObject *slots[OPPROF_MAX_SHAPE_ARGS];
    uint16_t flags = 0;
    Py_ssize_t first = self != NULL, count = first + n;
    if (count > max_args) {
        count = max_args;
        flags |= OPPROF_FLAG_TRUNCATED;
    }
    memset(slots, 0, sizeof slots);
    if (self != NULL)
        slots[0] = self;
    for (Py_ssize_t i = first; i < count; i++)
        slots[i] = args[i - first];
    if (kwnames != NULL) {
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(kwnames); j++)
            np_place_keyword(slots, &count, &flags, params, first, n, max_args,
                             PyTuple_GET_ITEM(kwnames, j), args[n + j]);
    } else if (kwdict != NULL && PyDict_Check(kwdict)) {
        Py_ssize_t pos = 0;
        PyObject *name, *value;
        while (PyDict_Next(kwdict, &pos, &name, &value))
            np_place_keyword(slots, &count, &flags, params, first, n, max_args, name, value);
    }
    if (count == 0)
        return;
    int64_t w[OPPROF_SHAPE_ENTRY_WORDS];
    int32_t used = 1;
    w[0] = count;
    for (Py_ssize_t i = 0; i < count; i++)
        used += np_put_other(&w[used], &flags, slots[i], strings && i >= first);
    opprof_op_shapes(t, w, used, flags);
}
