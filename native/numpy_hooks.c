/* Native numpy capture: trampolines around numpy's C entry points.
 *
 * See numpy_hooks.h for the two hooks and docs/how-it-works.md for why these two:
 * operators (a + b, a @ b) reach the ufunc's per-object vectorcall pointer,
 * while methods and module functions are called by CPython's specialised
 * call sites straight through PyMethodDef.ml_meth.
 *
 * Install, uninstall and every trampoline run with the GIL held, so the
 * tables below need no locks.  Idle cost is one table lookup and one load of
 * the recording word (opprof_g_active) before calling the original.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>
#include <string.h>

#include <numpy/arrayobject.h>

#include "hotpath.h"
#include "numpy_args.h"
#include "numpy_hooks.h"
#include "ptr_table.h"

_Static_assert(sizeof(npy_intp) == sizeof(int64_t), "array dims are passed as int64_t");

#define OPPROF_NP_MAX_CALLS 1024 /* hooked ufuncs + dispatchers */
#define OPPROF_NP_TABLE 2048     /* open-addressing table, power of two, load <= 0.5 */
#define OPPROF_NP_SLOTS 256      /* method trampolines per calling convention */

/* The session's recording word when it captures numpy, else 0: the one load
 * and test a hooked call pays when no profile records. */
static inline uint32_t np_active(void)
{
    uint32_t active = opprof_hot_active();
    return active & OPPROF_OPT_CAPTURE_NUMPY ? active : 0;
}

/* Options that make a begun op look at its arguments (np_capture). */
#define NP_CAPTURE_OPTS (OPPROF_OPT_RECORD_SHAPES | OPPROF_OPT_WITH_STACK)

/* record_shapes: self (when an array method) then positional arguments, at
 * most max_args (more flag the event as truncated), built on the stack and
 * handed to the core whole.  ndarrays, the common case, are written here,
 * inline; other arguments and calls with keywords to place go out of line
 * (numpy_args.c). */
static inline void np_capture_shapes(opprof_thread *t, PyObject *self, PyObject *const *args,
                                     Py_ssize_t n, PyObject *kwnames, PyObject *kwdict,
                                     PyObject *params, int strings, int max_args)
{
    if (__builtin_expect(params != NULL, 0) &&
        ((kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) || kwdict != NULL)) {
        np_args_capture_keywords(t, self, args, n, kwnames, kwdict, params, strings, max_args);
        return;
    }
    int64_t w[OPPROF_SHAPE_ENTRY_WORDS];
    int32_t used = 1;
    uint16_t flags = 0;
    Py_ssize_t count = n + (self != NULL);
    if (count == 0)
        return;
    if (count > max_args) {
        count = max_args;
        flags |= OPPROF_FLAG_TRUNCATED;
    }
    w[0] = count;
    for (Py_ssize_t i = 0; i < count; i++) {
        PyObject *o = self == NULL ? args[i] : i == 0 ? self : args[i - 1];
        if (__builtin_expect(PyArray_Check(o), 1)) {
            PyArrayObject *a = (PyArrayObject *)o;
            int nd = PyArray_NDIM(a);
            if (__builtin_expect(nd > OPPROF_MAX_SHAPE_DIMS, 0)) {
                nd = OPPROF_MAX_SHAPE_DIMS;
                flags |= OPPROF_FLAG_TRUNCATED;
            }
            int64_t *p = &w[used];
            p[0] = opprof_shape_word(nd, PyArray_TYPE(a));
            const npy_intp *dims = PyArray_DIMS(a);
            for (int d = 0; d < nd; d++)
                p[1 + d] = dims[d];
            used += 1 + nd;
        } else {
            used += np_put_other(&w[used], &flags, o, strings && (self == NULL || i > 0));
        }
    }
    opprof_op_shapes(t, w, used, flags);
}

/* Called only when `active` has a NP_CAPTURE_OPTS bit. */
static __attribute__((noinline)) void np_capture(opprof_thread *t, uint32_t active, PyObject *self,
                                                 PyObject *const *args, Py_ssize_t n,
                                                 PyObject *kwnames, PyObject *kwdict,
                                                 PyObject *params, int strings, int max_args)
{
    if (active & OPPROF_OPT_RECORD_SHAPES)
        np_capture_shapes(t, self, args, n, kwnames, kwdict, params, strings, max_args);
    if (active & OPPROF_OPT_WITH_STACK)
        opprof_op_capture_stack(t);
}

static int np_import_numpy(void);

/* numpy's C API in this file, which opprof_numpy_capture_call reads arrays with:
 * another library's hooks call it before they install (scipy alone, no numpy
 * source).  OPPROF_OK, or an error code with the message set; GIL held. */
int opprof_numpy_capture_ready(void) { return np_import_numpy(); }

/* The same for another library's routines (scipy_hooks.c): positional arguments and,
 * with params, keyword arguments (a tp_call's dict) at their index. */
void opprof_numpy_capture_call(opprof_thread *t, uint32_t active, PyObject *const *args,
                               Py_ssize_t n, PyObject *kwdict, PyObject *params, int max_args)
{
    np_capture(t, active, NULL, args, n, NULL, kwdict, params, 0, max_args);
}

/* ---- call hooks: per-object vectorcall pointers --------------------------- */

enum { NP_FREE = 0, NP_OURS = 1, NP_FOREIGN = 2 };

typedef struct np_call {
    PyObject *obj; /* NULL: empty table cell */
    vectorcallfunc orig;
    uint32_t name;
    uint32_t ufunc_methods[OPPROF_NP_UFUNC_METHODS];
    PyObject *params;   /* parameter names for keywords, NULL: keywords not recorded */
    PyObject *instance; /* opprof_numpy_set_method: first argument renamed to ... */
    uint32_t instance_name;
    uint8_t state;
    uint8_t strings;  /* record str arguments (opprof_numpy_set_params) */
    uint8_t max_args; /* arguments recorded at most */
    uint8_t method;   /* args[0] is the instance of an unbound method: not an operand */
} np_call;

static np_call g_calls[OPPROF_NP_TABLE];
static int64_t g_n_calls;   /* NP_OURS entries */
static int64_t g_n_methods; /* NP_OURS method slots */
static int64_t g_misses;
static int g_installed;

static inline np_call *np_lookup(PyObject *obj)
{
    return OPPROF_PTR_FIND(g_calls, OPPROF_NP_TABLE - 1, obj);
}

static np_call *np_insert(PyObject *obj)
{
    return OPPROF_PTR_PLACE(g_calls, OPPROF_NP_TABLE - 1, obj);
}

static inline vectorcallfunc *np_slot_of(PyObject *obj)
{
    return (vectorcallfunc *)((char *)obj + Py_TYPE(obj)->tp_vectorcall_offset);
}

static PyObject *np_call_tramp(PyObject *callable, PyObject *const *args, size_t nargsf,
                               PyObject *kwnames)
{
    np_call *c = np_lookup(callable);
    if (c == NULL) {
        g_misses++;
        PyErr_SetString(PyExc_SystemError, "pytest-opprof lost the original numpy call pointer");
        return NULL;
    }
    uint32_t active = np_active();
    opprof_thread *t;
    if (!active || (t = opprof_hot_thread()) == NULL)
        return c->orig(callable, args, nargsf, kwnames);
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    uint32_t name = c->name;
    Py_ssize_t skip = 0;
    if (__builtin_expect(c->method, 0) && n > 0) {
        skip = 1;
        if (args[0] == c->instance)
            name = c->instance_name;
    }
    if (opprof_hot_begin_recording(t, active, name, OPPROF_KIND_NUMPY) == 0 &&
        __builtin_expect(active & NP_CAPTURE_OPTS, 0))
        np_capture(t, active, NULL, args + skip, n - skip, kwnames, NULL, c->params, c->strings,
                   c->max_args);
    PyObject *r = c->orig(callable, args, nargsf, kwnames);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

static int np_can_swap(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    return PyType_HasFeature(tp, Py_TPFLAGS_HAVE_VECTORCALL) && tp->tp_vectorcall_offset > 0 &&
           *np_slot_of(obj) != NULL;
}

/* ---- method hooks: PyMethodDef.ml_meth, one trampoline per slot ------------ */

enum { FAM_FASTKW, FAM_FAST, FAM_KW, FAM_PLAIN, FAM_COUNT };
enum { CONV_FASTKW, CONV_FAST, CONV_KW, CONV_VARARGS, CONV_NOARGS, CONV_O };

typedef struct np_slot {
    PyMethodDef *def;
    void *orig; /* the original ml_meth */
    uint32_t name;
    PyObject *params;   /* as np_call's */
    PyObject *instance; /* as np_call's (OPPROF_NP_SELF_INSTANCE) */
    uint32_t instance_name;
    uint8_t state;    /* NP_FREE / NP_OURS / NP_FOREIGN */
    uint8_t max_args; /* as np_call's */
    uint8_t conv;
    uint8_t self_kind;
    uint8_t method_index;
} np_slot;

static np_slot g_slots[FAM_COUNT][OPPROF_NP_SLOTS];

static inline uint32_t np_slot_name(const np_slot *s, PyObject *self)
{
    if (s->self_kind == OPPROF_NP_SELF_INSTANCE && self == s->instance && self != NULL)
        return s->instance_name;
    if (s->self_kind == OPPROF_NP_SELF_UFUNC) {
        np_call *c = np_lookup(self);
        if (c != NULL && c->ufunc_methods[s->method_index] != 0)
            return c->ufunc_methods[s->method_index];
    }
    return s->name;
}

static inline opprof_thread *np_method_begin(uint32_t active, const np_slot *s, PyObject *self,
                                             PyObject *const *args, Py_ssize_t n, PyObject *kwnames,
                                             PyObject *kwdict)
{
    opprof_thread *t = opprof_hot_thread();
    if (t == NULL)
        return NULL;
    if (opprof_hot_begin_recording(t, active, np_slot_name(s, self), OPPROF_KIND_NUMPY) == 0 &&
        __builtin_expect(active & NP_CAPTURE_OPTS, 0))
        np_capture(t, active, s->self_kind == OPPROF_NP_SELF_ARRAY ? self : NULL, args, n, kwnames,
                   kwdict, s->params, 0, s->max_args);
    return t;
}

typedef PyObject *(*fastkw_fn)(PyObject *, PyObject *const *, Py_ssize_t, PyObject *);
typedef PyObject *(*fast_fn)(PyObject *, PyObject *const *, Py_ssize_t);
typedef PyObject *(*kw_fn)(PyObject *, PyObject *, PyObject *);
typedef PyObject *(*plain_fn)(PyObject *, PyObject *);

static __attribute__((noinline)) PyObject *
np_run_fastkw(const np_slot *s, PyObject *self, PyObject *const *a, Py_ssize_t n, PyObject *k)
{
    fastkw_fn orig = (fastkw_fn)s->orig;
    uint32_t active = np_active();
    opprof_thread *t;
    if (!active || (t = np_method_begin(active, s, self, a, n, k, NULL)) == NULL)
        return orig(self, a, n, k);
    PyObject *r = orig(self, a, n, k);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

static __attribute__((noinline)) PyObject *np_run_fast(const np_slot *s, PyObject *self,
                                                       PyObject *const *a, Py_ssize_t n)
{
    fast_fn orig = (fast_fn)s->orig;
    uint32_t active = np_active();
    opprof_thread *t;
    if (!active || (t = np_method_begin(active, s, self, a, n, NULL, NULL)) == NULL)
        return orig(self, a, n);
    PyObject *r = orig(self, a, n);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

static __attribute__((noinline)) PyObject *np_run_kw(const np_slot *s, PyObject *self, PyObject *a,
                                                     PyObject *k)
{
    kw_fn orig = (kw_fn)s->orig;
    uint32_t active = np_active();
    opprof_thread *t;
    if (!active || (t = np_method_begin(active, s, self, &PyTuple_GET_ITEM(a, 0),
                                        PyTuple_GET_SIZE(a), NULL, k)) == NULL)
        return orig(self, a, k);
    PyObject *r = orig(self, a, k);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

/* METH_VARARGS (a is a tuple), METH_O (a is the argument), METH_NOARGS (a is NULL). */
static __attribute__((noinline)) PyObject *np_run_plain(const np_slot *s, PyObject *self,
                                                        PyObject *a)
{
    plain_fn orig = (plain_fn)s->orig;
    uint32_t active = np_active();
    opprof_thread *t;
    if (!active)
        return orig(self, a);
    if (s->conv == CONV_VARARGS)
        t = np_method_begin(active, s, self, &PyTuple_GET_ITEM(a, 0), PyTuple_GET_SIZE(a), NULL,
                            NULL);
    else if (s->conv == CONV_O)
        t = np_method_begin(active, s, self, &a, 1, NULL, NULL);
    else
        t = np_method_begin(active, s, self, NULL, 0, NULL, NULL);
    if (t == NULL)
        return orig(self, a);
    PyObject *r = orig(self, a);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

/* 256 trampolines per family, each a tail call into its family's runner with
 * its own slot: ml_meth carries no user data, so the slot is the function.
 * The generator table is laid out by hand (16 per row): clang-format would
 * break it at arbitrary points. */
/* clang-format off */
#define NP_LO16(X, h) X(h, 0) X(h, 1) X(h, 2) X(h, 3) X(h, 4) X(h, 5) X(h, 6) X(h, 7) \
    X(h, 8) X(h, 9) X(h, 10) X(h, 11) X(h, 12) X(h, 13) X(h, 14) X(h, 15)
#define NP_ALL256(X) NP_LO16(X, 0) NP_LO16(X, 1) NP_LO16(X, 2) NP_LO16(X, 3) NP_LO16(X, 4) \
    NP_LO16(X, 5) NP_LO16(X, 6) NP_LO16(X, 7) NP_LO16(X, 8) NP_LO16(X, 9) NP_LO16(X, 10)   \
    NP_LO16(X, 11) NP_LO16(X, 12) NP_LO16(X, 13) NP_LO16(X, 14) NP_LO16(X, 15)
#define NP_IDX(h, l) ((h) * 16 + (l))
/* clang-format on */

#define NP_DEF_FASTKW(h, l)                                                                \
    static PyObject *np_tr_fastkw_##h##_##l(PyObject *s, PyObject *const *a, Py_ssize_t n, \
                                            PyObject *k)                                   \
    {                                                                                      \
        return np_run_fastkw(&g_slots[FAM_FASTKW][NP_IDX(h, l)], s, a, n, k);              \
    }
#define NP_DEF_FAST(h, l)                                                                \
    static PyObject *np_tr_fast_##h##_##l(PyObject *s, PyObject *const *a, Py_ssize_t n) \
    {                                                                                    \
        return np_run_fast(&g_slots[FAM_FAST][NP_IDX(h, l)], s, a, n);                   \
    }
#define NP_DEF_KW(h, l)                                                        \
    static PyObject *np_tr_kw_##h##_##l(PyObject *s, PyObject *a, PyObject *k) \
    {                                                                          \
        return np_run_kw(&g_slots[FAM_KW][NP_IDX(h, l)], s, a, k);             \
    }
#define NP_DEF_PLAIN(h, l)                                            \
    static PyObject *np_tr_plain_##h##_##l(PyObject *s, PyObject *a)  \
    {                                                                 \
        return np_run_plain(&g_slots[FAM_PLAIN][NP_IDX(h, l)], s, a); \
    }

NP_ALL256(NP_DEF_FASTKW)
NP_ALL256(NP_DEF_FAST)
NP_ALL256(NP_DEF_KW)
NP_ALL256(NP_DEF_PLAIN)

#define NP_PTR_FASTKW(h, l) (void *)np_tr_fastkw_##h##_##l,
#define NP_PTR_FAST(h, l) (void *)np_tr_fast_##h##_##l,
#define NP_PTR_KW(h, l) (void *)np_tr_kw_##h##_##l,
#define NP_PTR_PLAIN(h, l) (void *)np_tr_plain_##h##_##l,

static void *const g_tramps[FAM_COUNT][OPPROF_NP_SLOTS] = {
    {NP_ALL256(NP_PTR_FASTKW)},
    {NP_ALL256(NP_PTR_FAST)},
    {NP_ALL256(NP_PTR_KW)},
    {NP_ALL256(NP_PTR_PLAIN)},
};

/* Cython 3's cyfunction begins with a PyCFunctionObject (PyCMethodObject
 * since 3.9) outside the limited API, which numpy.random is not built with;
 * the type name and size are checked before m_ml is read. */
static int np_is_cyfunction(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    const char *dot = strrchr(tp->tp_name, '.');
    return strcmp(dot ? dot + 1 : tp->tp_name, "cython_function_or_method") == 0 &&
           tp->tp_basicsize >= (Py_ssize_t)sizeof(PyCMethodObject);
}

static PyMethodDef *np_def_of(PyObject *obj, int self_kind)
{
    if (self_kind == OPPROF_NP_SELF_INSTANCE)
        return np_is_cyfunction(obj) ? ((PyCFunctionObject *)obj)->m_ml : NULL;
    if (PyCFunction_Check(obj))
        return ((PyCFunctionObject *)obj)->m_ml;
    if (Py_IS_TYPE(obj, &PyMethodDescr_Type))
        return ((PyMethodDescrObject *)obj)->d_method;
    return NULL;
}

/* Family and convention of a PyMethodDef, -1 for one we do not wrap. */
static int np_conv_of(const PyMethodDef *def, int *family)
{
    int f = def->ml_flags & ~METH_COEXIST;
    switch (f) {
    case METH_FASTCALL | METH_KEYWORDS: *family = FAM_FASTKW; return CONV_FASTKW;
    case METH_FASTCALL: *family = FAM_FAST; return CONV_FAST;
    case METH_VARARGS | METH_KEYWORDS: *family = FAM_KW; return CONV_KW;
    case METH_VARARGS: *family = FAM_PLAIN; return CONV_VARARGS;
    case METH_NOARGS: *family = FAM_PLAIN; return CONV_NOARGS;
    case METH_O: *family = FAM_PLAIN; return CONV_O;
    default: return -1;
    }
}

static int np_free_slot(int family)
{
    for (int i = 0; i < OPPROF_NP_SLOTS; i++)
        if (g_slots[family][i].state == NP_FREE)
            return i;
    return -1;
}

/* ---- slot hooks: ndarray's mapping slots ---------------------------------- */

/* a[key] and a[key] = value reach PyArray_Type.tp_as_mapping through
 * PyObject_GetItem/SetItem (CPython 3.11 has no specialised BINARY_SUBSCR or
 * STORE_SUBSCR for ndarray), so one pointer each covers every index form.
 * The struct is numpy's static array_as_mapping, shared by ndarray and any
 * static subtype; Python subclasses (np.matrix, MaskedArray, memmap) got
 * their own copy of the original pointer when their class was made (CPython
 * takes it from ndarray.__getitem__'s wrapper descriptor) and stay unhooked.
 * sq_item is left alone: a[i] never reaches it (mapping comes first), only
 * iteration (`for row in a`) and PySequence_GetItem do. */
typedef struct np_type_slot {
    void *orig;
    uint32_t name;
    uint8_t state; /* NP_FREE / NP_OURS / NP_FOREIGN */
} np_type_slot;

static np_type_slot g_type_slots[OPPROF_NP_SLOTS_HOOKED];

static PyObject *np_getitem_tramp(PyObject *self, PyObject *key)
{
    binaryfunc orig = (binaryfunc)g_type_slots[OPPROF_NP_SLOT_GETITEM].orig;
    uint32_t active = np_active();
    opprof_thread *t;
    if (!active || (t = opprof_hot_thread()) == NULL)
        return orig(self, key);
    if (opprof_hot_begin_recording(t, active, g_type_slots[OPPROF_NP_SLOT_GETITEM].name,
                                   OPPROF_KIND_NUMPY) == 0 &&
        __builtin_expect(active & NP_CAPTURE_OPTS, 0))
        np_capture(t, active, self, &key, 1, NULL, NULL, NULL, 0, OPPROF_NP_DEFAULT_ARGS);
    PyObject *r = orig(self, key);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

static int np_setitem_tramp(PyObject *self, PyObject *key, PyObject *value)
{
    objobjargproc orig = (objobjargproc)g_type_slots[OPPROF_NP_SLOT_SETITEM].orig;
    uint32_t active = np_active();
    opprof_thread *t;
    /* del a[key] comes here too (value NULL; numpy refuses it): not an op. */
    if (!active || value == NULL || (t = opprof_hot_thread()) == NULL)
        return orig(self, key, value);
    if (opprof_hot_begin_recording(t, active, g_type_slots[OPPROF_NP_SLOT_SETITEM].name,
                                   OPPROF_KIND_NUMPY) == 0 &&
        __builtin_expect(active & NP_CAPTURE_OPTS, 0)) {
        PyObject *args[2] = {key, value};
        np_capture(t, active, self, args, 2, NULL, NULL, NULL, 0, OPPROF_NP_DEFAULT_ARGS);
    }
    int r = orig(self, key, value);
    opprof_hot_end(t, r < 0 ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

static void **np_type_slot_ptr(int k)
{
    PyMappingMethods *m = PyArray_Type.tp_as_mapping;
    if (m == NULL)
        return NULL;
    return k == OPPROF_NP_SLOT_GETITEM ? (void **)&m->mp_subscript : (void **)&m->mp_ass_subscript;
}

static void *const g_type_tramps[OPPROF_NP_SLOTS_HOOKED] = {(void *)np_getitem_tramp,
                                                            (void *)np_setitem_tramp};

/* ---- hash of hooked builtins ---------------------------------------------- */

/* The PyCFunction_Type.tp_hash swap.
 *
 * Why: CPython 3.11 hashes a builtin function or bound builtin method
 * (builtin_function_or_method, meth_hash) from (m_self, m_ml->ml_meth).
 * The method hooks swap ml_meth, so without this hash(np.array) would change
 * while hooked, and every set or dict keyed by such a function before the
 * install (numpy's ARRAY_FUNCTIONS set, functools caches) would stop finding
 * it; entries made while hooked would be lost again after uninstall.
 *
 * What it relies on: PyCFunction_Type is a static type whose tp_hash is a
 * plain writable field read by PyObject_Hash at every hash (nothing caches
 * it); a function's hash is recomputed each time, never stored; subtypes
 * that copied tp_hash at PyType_Ready (PyCMethod_Type, METH_METHOD) are never
 * hooked (np_conv_of refuses their flags), and method descriptors hash by
 * identity, so only this one slot sees ml_meth.  Equality (meth_richcompare)
 * reads ml_meth too, but on both sides at once: two functions of one def
 * still compare equal while hooked.
 *
 * Why it is safe: np_cfunc_hash hands every function it does not hook to the
 * saved original after one table probe, and for a hooked one runs the same
 * original with the original ml_meth put back for the duration, so every
 * hash is the value CPython would give with no hooks at all.  The GIL is held
 * across the probe and the put-back (free-threaded builds are refused by
 * opprof_numpy_supported), so no call can run through the def while its
 * ml_meth is the original.
 *
 * How it is restored: the install swaps tp_hash only after every table is
 * complete and no step after it can fail, so a failed install never leaves
 * it swapped.  opprof_numpy_uninstall (np_restore_all(1)) puts the saved
 * original back when tp_hash is still ours; when someone swapped it after
 * us, theirs stays and still reaches ours, which then only forwards (no slot
 * is NP_OURS any more).  The numpy source calls uninstall at its last
 * release; the profiler releases its sources in a `finally` and the
 * plugin's manager at pytest_unconfigure, each releasing every source even
 * when one raises (exceptions, KeyboardInterrupt, failing tests). */
#define OPPROF_NP_DEF_TABLE 2048 /* power of two, load <= 0.5 */

typedef struct np_def_cell {
    const PyMethodDef *def; /* NULL: empty cell */
    np_slot *slot;
} np_def_cell;

static np_def_cell g_def_cells[OPPROF_NP_DEF_TABLE];
static hashfunc g_cfunc_hash;

/* The slot of def: hooked now or left foreign by an earlier uninstall (every
 * non-free slot is in g_def_cells: a scan of all slots per method was most
 * of install); NULL when def is neither. */
static np_slot *np_def_slot(const PyMethodDef *def)
{
    np_def_cell *c = OPPROF_PTR_FIND(g_def_cells, OPPROF_NP_DEF_TABLE - 1, def);
    return c != NULL ? c->slot : NULL;
}

static void np_def_put(np_slot *s)
{
    *OPPROF_PTR_PLACE(g_def_cells, OPPROF_NP_DEF_TABLE - 1, s->def) = (np_def_cell){s->def, s};
}

static Py_hash_t np_cfunc_hash(PyObject *obj)
{
    PyMethodDef *def = ((PyCFunctionObject *)obj)->m_ml;
    np_slot *s = np_def_slot(def);
    if (s == NULL || s->state != NP_OURS)
        return g_cfunc_hash(obj);
    PyCFunction hooked = def->ml_meth;
    def->ml_meth = (PyCFunction)s->orig;
    Py_hash_t h = g_cfunc_hash(obj);
    def->ml_meth = hooked;
    return h;
}

/* ---- install / uninstall --------------------------------------------------- */

static int np_import_numpy(void)
{
    if (PyArray_API != NULL && np_args_ready() == 0)
        return 0;
    if (_import_array() < 0 || np_args_ready() < 0) {
        PyObject *type, *value, *tb;
        PyErr_Fetch(&type, &value, &tb);
        PyObject *s = value ? PyObject_Str(value) : NULL;
        const char *msg = s ? PyUnicode_AsUTF8(s) : NULL;
        int rc = opprof_fail(OPPROF_E_UNSUPPORTED, "numpy C API unavailable: %s",
                             msg ? msg : "unknown error");
        Py_XDECREF(s);
        Py_XDECREF(type);
        Py_XDECREF(value);
        Py_XDECREF(tb);
        PyErr_Clear();
        return rc;
    }
    return 0;
}

/* Restores our pointers and keeps foreign ones (and their originals) alive.
 * swapped = 0 after an install that failed before swapping anything in:
 * then our entries are simply dropped. */
static int64_t np_restore_all(int swapped)
{
    static np_call keep[OPPROF_NP_TABLE];
    int64_t foreign = 0;
    int n_keep = 0;
    for (int i = 0; i < OPPROF_NP_TABLE; i++) {
        np_call *c = &g_calls[i];
        if (c->obj == NULL)
            continue;
        if (c->state == NP_OURS) {
            vectorcallfunc *p = np_slot_of(c->obj);
            if (!swapped)
                continue;
            if (*p == np_call_tramp) {
                *p = c->orig;
                continue;
            }
            c->state = NP_FOREIGN;
            foreign++;
        }
        keep[n_keep++] = *c;
    }
    memset(g_calls, 0, sizeof g_calls);
    for (int i = 0; i < n_keep; i++)
        *np_insert(keep[i].obj) = keep[i];
    for (int f = 0; f < FAM_COUNT; f++) {
        for (int i = 0; i < OPPROF_NP_SLOTS; i++) {
            np_slot *s = &g_slots[f][i];
            if (s->state != NP_OURS)
                continue;
            if (!swapped) {
                memset(s, 0, sizeof *s);
            } else if (s->def->ml_meth == (PyCFunction)g_tramps[f][i]) {
                s->def->ml_meth = (PyCFunction)s->orig;
                memset(s, 0, sizeof *s);
            } else {
                s->state = NP_FOREIGN;
                foreign++;
            }
        }
    }
    for (int k = 0; k < OPPROF_NP_SLOTS_HOOKED; k++) {
        np_type_slot *ts = &g_type_slots[k];
        if (ts->state != NP_OURS)
            continue;
        void **p = np_type_slot_ptr(k);
        if (!swapped || *p == g_type_tramps[k]) {
            if (swapped)
                *p = ts->orig;
            memset(ts, 0, sizeof *ts);
        } else {
            /* Someone wrapped ours: it keeps forwarding to the saved original. */
            ts->state = NP_FOREIGN;
            foreign++;
        }
    }
    if (swapped && PyCFunction_Type.tp_hash == np_cfunc_hash)
        PyCFunction_Type.tp_hash = g_cfunc_hash;
    memset(g_def_cells, 0, sizeof g_def_cells);
    for (int f = 0; f < FAM_COUNT; f++)
        for (int i = 0; i < OPPROF_NP_SLOTS; i++)
            if (g_slots[f][i].state == NP_FOREIGN)
                np_def_put(&g_slots[f][i]);
    g_n_calls = 0;
    g_n_methods = 0;
    return foreign;
}

int opprof_numpy_supported(void)
{
#ifdef Py_GIL_DISABLED
    opprof_fail(OPPROF_E_UNSUPPORTED,
                "numpy capture needs the GIL; this is a free-threaded Python");
    return 0;
#else
    return 1;
#endif
}

static int np_install_locked(const intptr_t *calls, const uint32_t *call_names,
                             const uint32_t *ufunc_method_names, int64_t n_calls,
                             const intptr_t *methods, const uint32_t *method_names,
                             const uint8_t *method_self, const uint8_t *method_index,
                             int64_t n_methods, const uint32_t *slot_names, int64_t *skipped)
{
    if (g_installed)
        return opprof_fail(OPPROF_E_STATE, "numpy hooks are already installed");
    if (!opprof_numpy_supported())
        return OPPROF_E_UNSUPPORTED;
    if (n_calls < 0 || n_methods < 0 || n_calls > OPPROF_NP_MAX_CALLS)
        return opprof_fail(OPPROF_E_ARG, "numpy hooks: %lld call objects (at most %d)",
                           (long long)n_calls, OPPROF_NP_MAX_CALLS);
    int rc = np_import_numpy();
    if (rc != OPPROF_OK)
        return rc;
    int64_t skip = 0;
    for (int64_t i = 0; i < n_calls; i++) {
        PyObject *obj = (PyObject *)calls[i];
        np_call *c = np_insert(obj);
        if (!np_can_swap(obj) || *np_slot_of(obj) == np_call_tramp || c->obj != NULL) {
            skip++;
            continue;
        }
        c->obj = obj;
        c->orig = *np_slot_of(obj);
        c->name = call_names[i];
        for (int k = 0; k < OPPROF_NP_UFUNC_METHODS; k++)
            c->ufunc_methods[k] = ufunc_method_names[i * OPPROF_NP_UFUNC_METHODS + k];
        c->state = NP_OURS;
        c->max_args = OPPROF_NP_DEFAULT_ARGS;
        g_n_calls++;
    }
    for (int64_t j = 0; j < n_methods; j++) {
        PyMethodDef *def = np_def_of((PyObject *)methods[j], method_self[j]);
        int family = 0;
        int conv = def ? np_conv_of(def, &family) : -1;
        if (conv < 0 || np_def_slot(def) != NULL || method_index[j] >= OPPROF_NP_UFUNC_METHODS) {
            skip++;
            continue;
        }
        int i = np_free_slot(family);
        if (i < 0) {
            np_restore_all(0);
            return opprof_fail(OPPROF_E_HOOK,
                               "numpy hooks: more than %d methods of one calling "
                               "convention",
                               OPPROF_NP_SLOTS);
        }
        np_slot *s = &g_slots[family][i];
        s->def = def;
        s->orig = (void *)def->ml_meth;
        s->name = method_names[j];
        s->conv = (uint8_t)conv;
        s->self_kind = method_self[j];
        s->method_index = method_index[j];
        s->state = NP_OURS;
        s->max_args = OPPROF_NP_DEFAULT_ARGS;
        np_def_put(s);
        g_n_methods++;
    }
    for (int k = 0; k < OPPROF_NP_SLOTS_HOOKED; k++) {
        void **p = np_type_slot_ptr(k);
        /* A slot left foreign by an earlier uninstall keeps its wrapper's chain. */
        if (slot_names[k] == 0 || p == NULL || *p == NULL || g_type_slots[k].state != NP_FREE) {
            skip += slot_names[k] != 0;
            continue;
        }
        g_type_slots[k] = (np_type_slot){*p, slot_names[k], NP_OURS};
    }
    /* Tables are complete before the first pointer changes hands. */
    for (int i = 0; i < OPPROF_NP_TABLE; i++)
        if (g_calls[i].obj != NULL && g_calls[i].state == NP_OURS)
            *np_slot_of(g_calls[i].obj) = np_call_tramp;
    if (PyCFunction_Type.tp_hash != np_cfunc_hash) {
        g_cfunc_hash = PyCFunction_Type.tp_hash;
        PyCFunction_Type.tp_hash = np_cfunc_hash;
    }
    for (int f = 0; f < FAM_COUNT; f++)
        for (int i = 0; i < OPPROF_NP_SLOTS; i++)
            if (g_slots[f][i].state == NP_OURS)
                g_slots[f][i].def->ml_meth = (PyCFunction)g_tramps[f][i];
    for (int k = 0; k < OPPROF_NP_SLOTS_HOOKED; k++)
        if (g_type_slots[k].state == NP_OURS)
            *np_type_slot_ptr(k) = g_type_tramps[k];
    g_installed = 1;
    *skipped = skip;
    return OPPROF_OK;
}

int opprof_numpy_install(const intptr_t *calls, const uint32_t *call_names,
                         const uint32_t *ufunc_method_names, int64_t n_calls,
                         const intptr_t *methods, const uint32_t *method_names,
                         const uint8_t *method_self, const uint8_t *method_index, int64_t n_methods,
                         const uint32_t *slot_names, int64_t *skipped)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc =
        np_install_locked(calls, call_names, ufunc_method_names, n_calls, methods, method_names,
                          method_self, method_index, n_methods, slot_names, skipped);
    PyGILState_Release(g);
    return rc;
}

int opprof_numpy_uninstall(int64_t *foreign)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = OPPROF_OK;
    if (!g_installed)
        rc = opprof_fail(OPPROF_E_STATE, "numpy hooks are not installed");
    else {
        *foreign = np_restore_all(1);
        g_installed = 0;
    }
    PyGILState_Release(g);
    return rc;
}

static int np_set_params_locked(intptr_t obj, intptr_t params, int strings, int max_args)
{
    PyObject *p = (PyObject *)params;
    np_call *c = np_lookup((PyObject *)obj);
    PyMethodDef *def = c == NULL ? np_def_of((PyObject *)obj, OPPROF_NP_SELF_NONE) : NULL;
    np_slot *s = def != NULL ? np_def_slot(def) : NULL;
    if (p != NULL && !PyTuple_CheckExact(p))
        return opprof_fail(OPPROF_E_ARG, "numpy hooks: parameter names must be a tuple");
    if (max_args < 1 || max_args > OPPROF_MAX_SHAPE_ARGS)
        return opprof_fail(OPPROF_E_ARG, "numpy hooks: max_args %d is not in 1..%d", max_args,
                           OPPROF_MAX_SHAPE_ARGS);
    if (c != NULL && c->state == NP_OURS) {
        c->params = p;
        c->strings = (uint8_t)(strings != 0);
        c->max_args = (uint8_t)max_args;
    } else if (s != NULL && s->state == NP_OURS && !strings) {
        s->params = p;
        s->max_args = (uint8_t)max_args;
    } else
        return opprof_fail(OPPROF_E_ARG, "numpy hooks: object %p is not hooked", (void *)obj);
    return OPPROF_OK;
}

int opprof_numpy_set_params(intptr_t obj, intptr_t params, int strings, int max_args)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = np_set_params_locked(obj, params, strings, max_args);
    PyGILState_Release(g);
    return rc;
}

static int np_set_method_locked(intptr_t obj, intptr_t instance, uint32_t instance_name)
{
    np_call *c = np_lookup((PyObject *)obj);
    PyMethodDef *def = c == NULL ? np_def_of((PyObject *)obj, OPPROF_NP_SELF_INSTANCE) : NULL;
    np_slot *s = def != NULL ? np_def_slot(def) : NULL;
    if (c != NULL && c->state == NP_OURS) {
        c->method = 1;
        c->instance = (PyObject *)instance;
        c->instance_name = instance_name;
    } else if (s != NULL && s->state == NP_OURS && s->self_kind == OPPROF_NP_SELF_INSTANCE) {
        s->instance = (PyObject *)instance;
        s->instance_name = instance_name;
    } else
        return opprof_fail(OPPROF_E_ARG, "numpy hooks: object %p is not a hooked method",
                           (void *)obj);
    return OPPROF_OK;
}

int opprof_numpy_set_method(intptr_t obj, intptr_t instance, uint32_t instance_name)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = np_set_method_locked(obj, instance, instance_name);
    PyGILState_Release(g);
    return rc;
}

int opprof_numpy_set_all(const intptr_t *param_objs, const intptr_t *params, const uint8_t *strings,
                         const uint8_t *max_args, int64_t n_params, const intptr_t *method_objs,
                         const intptr_t *instances, const uint32_t *instance_names,
                         int64_t n_methods)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = OPPROF_OK;
    for (int64_t i = 0; i < n_params && rc == OPPROF_OK; i++)
        rc = np_set_params_locked(param_objs[i], params[i], strings[i], max_args[i]);
    for (int64_t i = 0; i < n_methods && rc == OPPROF_OK; i++)
        rc = np_set_method_locked(method_objs[i], instances[i], instance_names[i]);
    PyGILState_Release(g);
    return rc;
}

int opprof_numpy_installed(void) { return g_installed; }
int64_t opprof_numpy_hooked_calls(void) { return g_n_calls; }
int64_t opprof_numpy_hooked_methods(void) { return g_n_methods; }
int64_t opprof_numpy_misses(void) { return g_misses; }
