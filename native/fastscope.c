/* Builtin (PyCFunction) doors to the scope API for record_function.
 *
 * A cffi API-mode call releases and retakes the GIL around every call: two
 * such calls per scope were most of record_function's cost under a profile.
 * These builtins are called by CPython with the GIL held and run
 * opprof_scope_push/pop's fast path inline (hotpath.h). */
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

/* Static: the function objects point at these for the life of the process. */
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
