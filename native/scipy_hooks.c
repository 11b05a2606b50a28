/* Native capture of f2py routines: a trampoline in each `fortran` type's tp_call.
 *
 * See scipy_hooks.h.  A handful of slots cover every routine of every f2py
 * module (scipy.linalg's _flapack and _fblas hold about 1,400), so install
 * costs one table fill and a call costs a table lookup, the recording word's
 * load and, when recording, the same begin/end as a numpy op.  Install,
 * uninstall and the trampoline run with the GIL held, so no lock is needed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "scipy_hooks.h"
#include "hotpath.h"
#include "numpy_args.h"
#include "ptr_table.h"

/* numpy_hooks.c: record_shapes/with_stack of a call's positional arguments and,
 * with params, its keyword arguments at their index (at most max_args). */
void opprof_numpy_capture_call(opprof_thread *t, uint32_t active, PyObject *const *args,
                               Py_ssize_t n, PyObject *kwdict, PyObject *params, int max_args);
int opprof_numpy_capture_ready(void);

#define F2PY_MAX_TYPES 64

typedef struct f2py_entry {
    PyObject *obj;    /* NULL: empty cell */
    PyObject *params; /* parameter names (a tuple), NULL: positional arguments only */
    uint32_t name;
    uint8_t max_args;
} f2py_entry;

typedef struct f2py_type {
    PyTypeObject *type;
    ternaryfunc orig;
    int stuck; /* someone wrapped our trampoline: it keeps routing here for good */
} f2py_type;

static f2py_entry *g_table;
static size_t g_mask;
static f2py_type g_types[F2PY_MAX_TYPES];
static int g_n_types;
static int g_installed;
static uint32_t g_other_name;

static const f2py_entry g_unknown = {NULL, NULL, 0, OPPROF_NP_DEFAULT_ARGS};

/* The entry of obj; for an object not in the table, one with no name (0: the
 * caller uses g_other_name) that records positional arguments. */
static inline const f2py_entry *f2py_entry_of(PyObject *obj)
{
    const f2py_entry *e = g_table != NULL ? OPPROF_PTR_FIND(g_table, g_mask, obj) : NULL;
    return e != NULL ? e : &g_unknown;
}

static inline ternaryfunc f2py_orig_of(PyTypeObject *tp)
{
    for (int i = 0; i < g_n_types; i++)
        if (g_types[i].type == tp)
            return g_types[i].orig;
    return NULL;
}

static PyObject *f2py_tramp(PyObject *self, PyObject *args, PyObject *kwargs)
{
    ternaryfunc orig = f2py_orig_of(Py_TYPE(self));
    if (orig == NULL) {
        PyErr_SetString(PyExc_SystemError, "pytest-opprof lost the original f2py call slot");
        return NULL;
    }
    uint32_t active = opprof_hot_active();
    opprof_thread *t;
    if (!(active & OPPROF_OPT_CAPTURE_SCIPY) || (t = opprof_hot_thread()) == NULL)
        return orig(self, args, kwargs);
    const f2py_entry *e = f2py_entry_of(self);
    uint32_t name = e->obj != NULL ? e->name : g_other_name;
    if (opprof_hot_begin_recording(t, active, name, OPPROF_KIND_NUMPY) == 0 &&
        __builtin_expect(active & (OPPROF_OPT_RECORD_SHAPES | OPPROF_OPT_WITH_STACK), 0))
        opprof_numpy_capture_call(t, active, &PyTuple_GET_ITEM(args, 0), PyTuple_GET_SIZE(args),
                                  kwargs, e->params, e->max_args);
    PyObject *r = orig(self, args, kwargs);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

static int f2py_type_ok(PyTypeObject *tp)
{
    return tp != NULL && PyType_Check((PyObject *)tp) && tp->tp_call != NULL &&
           !PyType_HasFeature(tp, Py_TPFLAGS_HAVE_VECTORCALL);
}

int opprof_f2py_install(const intptr_t *types, int64_t n_types, const intptr_t *objs,
                        const uint32_t *names, const intptr_t *params, const uint8_t *max_args,
                        int64_t n, uint32_t other_name)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = OPPROF_OK;
    if (g_installed) {
        rc = opprof_fail(OPPROF_E_STATE, "f2py routines are already hooked");
        goto done;
    }
    /* The trampoline records array arguments with numpy's C API, even when the
     * numpy source is not installed (capture=["scipy"]). */
    if ((rc = opprof_numpy_capture_ready()) != OPPROF_OK)
        goto done;
    int stuck = 0;
    for (int i = 0; i < g_n_types; i++)
        stuck += g_types[i].stuck;
    if (n < 0 || n_types < 0 || stuck + n_types > F2PY_MAX_TYPES) {
        rc = opprof_fail(OPPROF_E_ARG, "f2py install: %lld types (at most %d), %lld routines",
                         (long long)n_types, F2PY_MAX_TYPES - stuck, (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n_types; i++) {
        PyTypeObject *tp = (PyTypeObject *)types[i];
        if (!f2py_type_ok(tp) || tp->tp_call == f2py_tramp) {
            rc = opprof_fail(OPPROF_E_UNSUPPORTED,
                             "not an unhooked f2py routine type without vectorcall");
            goto done;
        }
    }
    for (int64_t i = 0; i < n; i++) {
        PyObject *p = (PyObject *)params[i];
        if ((p != NULL && !PyTuple_Check(p)) || max_args[i] < 1 ||
            max_args[i] > OPPROF_MAX_SHAPE_ARGS) {
            rc = opprof_fail(OPPROF_E_ARG,
                             "f2py install: routine %lld: params must be a tuple of names "
                             "and max_args 1..%d, got %u",
                             (long long)i, OPPROF_MAX_SHAPE_ARGS, (unsigned)max_args[i]);
            goto done;
        }
    }
    size_t size = opprof_ptr_table_cells((size_t)n);
    f2py_entry *table = calloc(size, sizeof *table);
    if (table == NULL) {
        rc = opprof_fail(OPPROF_E_NOMEM, "no memory for %lld f2py routines", (long long)n);
        goto done;
    }
    /* A wrapped trampoline from an earlier install still routes through this
     * table: it is replaced (the old one stays allocated), never freed under it. */
    g_table = table;
    g_mask = size - 1;
    for (int64_t i = 0; i < n; i++) {
        PyObject *obj = (PyObject *)objs[i];
        *OPPROF_PTR_PLACE(table, g_mask, obj) =
            (f2py_entry){obj, (PyObject *)params[i], names[i], max_args[i]};
    }
    g_other_name = other_name;
    /* Keep stuck types first (their trampolines still look them up), then add. */
    int kept = 0;
    for (int i = 0; i < g_n_types; i++)
        if (g_types[i].stuck)
            g_types[kept++] = g_types[i];
    g_n_types = kept;
    for (int64_t i = 0; i < n_types; i++) {
        PyTypeObject *tp = (PyTypeObject *)types[i];
        g_types[g_n_types++] = (f2py_type){tp, tp->tp_call, 0};
        tp->tp_call = f2py_tramp;
    }
    g_installed = 1;
done:
    PyGILState_Release(g);
    return rc;
}

int opprof_f2py_uninstall(int64_t *foreign)
{
    PyGILState_STATE g = PyGILState_Ensure();
    *foreign = 0;
    if (g_installed) {
        for (int i = 0; i < g_n_types; i++) {
            f2py_type *ft = &g_types[i];
            if (ft->stuck)
                continue;
            if (ft->type->tp_call == f2py_tramp) {
                ft->type->tp_call = ft->orig;
            } else {
                ft->stuck = 1;
                ++*foreign;
            }
        }
        if (*foreign == 0) {
            /* No trampoline is reachable any more (calls inside one finished:
             * the GIL is held), so the table can go. */
            free(g_table);
            g_table = NULL;
        }
        g_installed = 0;
    }
    PyGILState_Release(g);
    return OPPROF_OK;
}

int opprof_f2py_installed(void) { return g_installed; }

/* ---- Cython functions: per-object vectorcall pointers ------------------- */

typedef struct vc_entry {
    PyObject *obj;       /* NULL: empty cell */
    vectorcallfunc orig; /* NULL: a METH_VARARGS C function, called through tp_call */
    uint32_t name;
    uint8_t ours; /* the pointer holds our trampoline (until uninstall) */
} vc_entry;

static vc_entry *g_vc;
static size_t g_vc_mask;
static int g_vc_installed;
static int g_vc_stuck; /* someone wrapped a trampoline: the table stays, no new install */

static inline vectorcallfunc *vc_slot_of(PyObject *obj)
{
    return (vectorcallfunc *)((char *)obj + Py_TYPE(obj)->tp_vectorcall_offset);
}

static inline vc_entry *vc_lookup(PyObject *obj)
{
    return g_vc != NULL ? OPPROF_PTR_FIND(g_vc, g_vc_mask, obj) : NULL;
}

/* What CPython does for a callable without vectorcall: the arguments as a tuple
 * and a dict, to the type's tp_call (not PyObject_Call: it would find the
 * trampoline in the vectorcall slot again). */
static PyObject *vc_tp_call(PyObject *callable, PyObject *const *args, size_t nargsf,
                            PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    PyObject *tuple = PyTuple_New(n);
    if (tuple == NULL)
        return NULL;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_INCREF(args[i]);
        PyTuple_SET_ITEM(tuple, i, args[i]);
    }
    PyObject *kwargs = NULL;
    if (kwnames != NULL && PyTuple_GET_SIZE(kwnames) > 0) {
        kwargs = PyDict_New();
        for (Py_ssize_t j = 0; kwargs != NULL && j < PyTuple_GET_SIZE(kwnames); j++)
            if (PyDict_SetItem(kwargs, PyTuple_GET_ITEM(kwnames, j), args[n + j]) < 0)
                Py_CLEAR(kwargs);
        if (kwargs == NULL) {
            Py_DECREF(tuple);
            return NULL;
        }
    }
    PyObject *r = Py_TYPE(callable)->tp_call(callable, tuple, kwargs);
    Py_DECREF(tuple);
    Py_XDECREF(kwargs);
    return r;
}

static inline PyObject *vc_call_orig(const vc_entry *e, PyObject *callable, PyObject *const *args,
                                     size_t nargsf, PyObject *kwnames)
{
    if (e->orig == NULL)
        return vc_tp_call(callable, args, nargsf, kwnames);
    return e->orig(callable, args, nargsf, kwnames);
}

static PyObject *vc_tramp(PyObject *callable, PyObject *const *args, size_t nargsf,
                          PyObject *kwnames)
{
    vc_entry *e = vc_lookup(callable);
    if (e == NULL) {
        PyErr_SetString(PyExc_SystemError, "pytest-opprof lost the original vectorcall pointer");
        return NULL;
    }
    uint32_t active = opprof_hot_active();
    opprof_thread *t;
    if (!(active & OPPROF_OPT_CAPTURE_SCIPY) || (t = opprof_hot_thread()) == NULL)
        return vc_call_orig(e, callable, args, nargsf, kwnames);
    if (opprof_hot_begin_recording(t, active, e->name, OPPROF_KIND_NUMPY) == 0 &&
        __builtin_expect(active & (OPPROF_OPT_RECORD_SHAPES | OPPROF_OPT_WITH_STACK), 0))
        opprof_numpy_capture_call(t, active, args, PyVectorcall_NARGS(nargsf), NULL, NULL,
                                  OPPROF_NP_DEFAULT_ARGS);
    PyObject *r = vc_call_orig(e, callable, args, nargsf, kwnames);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

/* A Cython function's pointer is swapped.  A plain C function (exactly
 * builtin_function_or_method) is hooked only when it takes *args
 * (METH_VARARGS): CPython leaves its pointer NULL and calls it through tp_call,
 * so a pointer set here sees every call.  The fast kinds (METH_O, METH_FASTCALL)
 * are called directly from specialised call sites, past any pointer: left out. */
static int vc_can_swap(PyObject *obj)
{
    PyTypeObject *tp = Py_TYPE(obj);
    if (!PyType_HasFeature(tp, Py_TPFLAGS_HAVE_VECTORCALL) || tp->tp_vectorcall_offset <= 0 ||
        *vc_slot_of(obj) == vc_tramp)
        return 0;
    if (PyCFunction_CheckExact(obj)) {
        int flags = PyCFunction_GET_FLAGS(obj);
        return *vc_slot_of(obj) == NULL && (flags & ~METH_KEYWORDS) == METH_VARARGS &&
               tp->tp_call != NULL;
    }
    return *vc_slot_of(obj) != NULL;
}

int opprof_vcall_install(const intptr_t *objs, const uint32_t *names, int64_t n, int64_t *skipped)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int rc = OPPROF_OK;
    *skipped = 0;
    if (g_vc_installed || g_vc_stuck || n < 0) {
        rc = opprof_fail(n < 0 ? OPPROF_E_ARG : OPPROF_E_STATE,
                         n < 0        ? "negative function count"
                         : g_vc_stuck ? "Cython functions were wrapped by someone else while "
                                        "hooked; not hooked again"
                                      : "Cython functions are already hooked");
        goto done;
    }
    if ((rc = opprof_numpy_capture_ready()) != OPPROF_OK)
        goto done;
    size_t size = opprof_ptr_table_cells((size_t)n);
    vc_entry *table = calloc(size, sizeof *table);
    if (table == NULL) {
        rc = opprof_fail(OPPROF_E_NOMEM, "no memory for %lld functions", (long long)n);
        goto done;
    }
    g_vc = table;
    g_vc_mask = size - 1;
    for (int64_t i = 0; i < n; i++) {
        PyObject *obj = (PyObject *)objs[i];
        if (!vc_can_swap(obj)) {
            ++*skipped;
            continue;
        }
        vc_entry *e = OPPROF_PTR_PLACE(table, g_vc_mask, obj);
        if (e->obj == obj)
            continue;
        *e = (vc_entry){obj, *vc_slot_of(obj), names[i], 1};
        *vc_slot_of(obj) = vc_tramp;
    }
    g_vc_installed = 1;
done:
    PyGILState_Release(g);
    return rc;
}

int opprof_vcall_uninstall(int64_t *foreign)
{
    PyGILState_STATE g = PyGILState_Ensure();
    *foreign = 0;
    if (g_vc_installed) {
        for (size_t i = 0; i <= g_vc_mask; i++) {
            vc_entry *e = &g_vc[i];
            if (e->obj == NULL || !e->ours)
                continue;
            if (*vc_slot_of(e->obj) == vc_tramp) {
                *vc_slot_of(e->obj) = e->orig;
                e->ours = 0;
            } else {
                ++*foreign;
            }
        }
        if (*foreign == 0) {
            free(g_vc);
            g_vc = NULL;
        } else {
            g_vc_stuck = 1; /* the wrapped trampolines still look their originals up here */
        }
        g_vc_installed = 0;
    }
    PyGILState_Release(g);
    return OPPROF_OK;
}
