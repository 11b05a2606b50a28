/* Builtin (PyCFunction) doors to the scope API for record_function: the
 * module-dict door.
 *
 * Why: a cffi API-mode call releases and retakes the GIL around every call
 * (DESIGN-NOTES: 76 ns a call, 131 with a GIL round-trip inside), and two
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
 * code its cffi twin returns, and where the fast path cannot serve (no
 * thread state, or a pop with no open scope) it calls the twin itself, so
 * the error text is the same.  The tp_hash swap (numpy_hooks.c) sees these
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
        return PyLong_FromLong(opprof_scope_push((uint32_t)id)); /* sets the error text */
    if (opprof_hot_scope_push(t, (uint32_t)id))
        opprof_op_capture_stack(t);
    return PyLong_FromLong(OPPROF_OK);
}

static PyObject *fast_scope_pop(PyObject *self, PyObject *arg)
{
    (void)self;
    unsigned long flags = PyLong_AsUnsignedLong(arg);
    if (flags == (unsigned long)-1 && PyErr_Occurred())
        return NULL;
    opprof_thread *t = opprof_tls_state;
    if (t == NULL || t->depth <= 0)
        return PyLong_FromLong(opprof_scope_pop((uint32_t)flags)); /* sets the error text */
    opprof_hot_end(t, (uint16_t)flags);
    return PyLong_FromLong(OPPROF_OK);
}

/* Static: each function object keeps a pointer to its entry (m_ml). */
static PyMethodDef fast_defs[] = {
    {"scope_push_fast", fast_scope_push, METH_O, "Open a scope (name id); returns a status."},
    {"scope_pop_fast", fast_scope_pop, METH_O,
     "Close the innermost scope (flags); returns a status."},
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
