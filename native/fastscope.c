/* Builtin (PyCFunction) doors to the scope API for record_function: the
 * module-dict door.
 *
 * Why: a cffi API-mode call releases and retakes the GIL around every call
 * (docs/how-it-works.md: 76 ns a call, 131 with a GIL round-trip inside), and two
 * such calls per scope were most of record_function's cost under a profile.
 * A builtin function is called by CPython with the GIL held, so these run
 * opprof_scope_push/pop's fast path inline (hotpath.h) and capture the
 * with_stack frames without a PyGILState_Ensure.
 *
 * What it relies on: opprof_install_scope_functions gets id(module) of a
 * live module (pytest_opprof._native passes its own, which lives as long as
 * the interpreter) and sets two attributes in that module's dict; the
 * function objects point at fast_defs (m_ml) for as long as they live,
 * which is why the table is static; the caller of a builtin holds the GIL.
 *
 * Why it is safe: nothing of Python's or numpy's changes hands, the door
 * only adds two names to our own module.  Each builtin returns the status
 * code its cffi twin returns (the push: as minus, a handle otherwise), and
 * where the fast path cannot serve (no thread state, or a pop with no open
 * scope) it calls the twin itself, so the error text is the same.  The pop
 * takes the handle its push gave: scopes of coroutines and generators
 * interleave on one thread, and the innermost open scope is then not the
 * one that closes.  The tp_hash swap (numpy_hooks.c) sees these
 * functions as not hooked and hashes them as CPython would.
 *
 * How it is restored: there is nothing to restore.  The door is installed
 * once per process (at import of _native) and patches no state of its
 * own; scopes opened through it are closed on every exit path by
 * record_function's own exit, exactly as with the cffi functions.
 */
#include <Python.h>

#include "hotpath.h" /* includes opprof.h, which has no include guard */

#include "fastscope.h"

/* A scope's handle, a positive int64: the token (a per-thread count) in bits
 * 25-62, the thread's slot in bits 9-24, the stack index in bits 0-8
 * (HANDLE_DEEP: past OPPROF_MAX_DEPTH, not stored).  The pop finds the
 * entry by index and checks the token, so a scope closes itself whatever
 * opened on the thread since (await, yield), as torch's handles do. */
#define HANDLE_INDEX_BITS 9
#define HANDLE_SLOT_BITS 16
#define HANDLE_DEEP ((1 << HANDLE_INDEX_BITS) - 1)
#define HANDLE_TOKEN_SHIFT (HANDLE_INDEX_BITS + HANDLE_SLOT_BITS)
#define HANDLE_SLOT_MASK ((1u << HANDLE_SLOT_BITS) - 1)

static PyObject *fast_scope_push(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long id = PyLong_AsUnsignedLong(arg);
    if (id == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    if (id > UINT32_MAX) {
        PyErr_SetString(PyExc_OverflowError, "scope_push_fast: name id out of range");
        return NULL;
    }
    /* opprof_scope_push inlined: the GIL is already held for the stack. */
    opprof_thread *t = opprof_hot_thread();
    if (t == NULL)
        return PyLong_FromLong(-opprof_scope_push((uint32_t)id)); /* sets the error text */
    int32_t d = t->depth;
    uint64_t token = ++t->scope_token & ((1ULL << (63 - HANDLE_TOKEN_SHIFT)) - 1);
    if (opprof_hot_scope_push(t, (uint32_t)id))
        opprof_op_capture_stack(t);
    if (d < OPPROF_MAX_DEPTH)
        t->open[d].token = token;
    int64_t index = d < OPPROF_MAX_DEPTH ? d : HANDLE_DEEP;
    return PyLong_FromLongLong((int64_t)(token << HANDLE_TOKEN_SHIFT) |
                               (int64_t)(t->slot & HANDLE_SLOT_MASK) << HANDLE_INDEX_BITS | index);
}

static PyObject *fast_scope_pop(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "scope_pop_fast(handle, flags) takes two ints");
        return NULL;
    }
    long long handle = PyLong_AsLongLong(args[0]);
    if (handle == -1 && PyErr_Occurred())
        return NULL;
    unsigned long flags = PyLong_AsUnsignedLong(args[1]);
    if (flags == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    opprof_thread *t = opprof_tls_state;
    int same_thread =
        t != NULL && handle > 0 &&
        ((uint64_t)handle >> HANDLE_INDEX_BITS & HANDLE_SLOT_MASK) == (t->slot & HANDLE_SLOT_MASK);
    if (handle > 0 && !same_thread)
        return PyLong_FromLong(opprof_fail(
            OPPROF_E_STATE,
            "record_function: scope closed on another thread than the one it was opened on"));
    if (t == NULL || t->depth <= 0 || handle <= 0)
        return PyLong_FromLong(opprof_scope_pop((uint32_t)flags)); /* sets the error text */
    int32_t d = (int32_t)(handle & HANDLE_DEEP);
    if (d == HANDLE_DEEP) {
        /* Past the stored depth there is no entry to find: the top goes. */
        opprof_hot_end(t, (uint16_t)flags);
        return PyLong_FromLong(OPPROF_OK);
    }
    core_open *o = &t->open[d];
    if (d >= t->depth || o->hole || o->token != (uint64_t)handle >> HANDLE_TOKEN_SHIFT)
        return PyLong_FromLong(opprof_fail(
            OPPROF_E_STATE, "record_function: scope closed twice, or after its thread's stack "
                            "was reset"));
    if (d == t->depth - 1)
        opprof_hot_end(t, (uint16_t)flags);
    else
        core_close_below_top(t, d, (uint16_t)flags);
    return PyLong_FromLong(OPPROF_OK);
}

/* Static: each function object keeps a pointer to its entry (m_ml). */
static PyMethodDef fast_defs[] = {
    {"scope_push_fast", fast_scope_push, METH_O,
     "Open a scope (name id); returns its handle (> 0) or minus a status."},
    {"scope_pop_fast", (PyCFunction)(void (*)(void))fast_scope_pop, METH_FASTCALL,
     "Close the scope of a handle (handle, flags); returns a status."},
};

int opprof_install_scope_functions(intptr_t module_id)
{
    /* cffi released the GIL around this call. */
    PyGILState_STATE g = PyGILState_Ensure();
    int status = OPPROF_OK;
    for (size_t i = 0; i < sizeof fast_defs / sizeof fast_defs[0]; i++) {
        PyObject *fn = PyCFunction_NewEx(&fast_defs[i], NULL, NULL);
        if (fn == NULL || PyObject_SetAttrString((PyObject *)module_id, fast_defs[i].ml_name, fn)) {
            Py_XDECREF(fn);
            PyErr_Clear();
            status =
                opprof_fail(OPPROF_E_PYTHON, "opprof_install_scope_functions: could not set %s",
                            fast_defs[i].ml_name);
            break;
        }
        Py_DECREF(fn);
    }
    PyGILState_Release(g);
    return status;
}
