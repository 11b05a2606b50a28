/* Native capture of Python-level library functions through PEP 523.
 *
 * See pyfunc_hooks.h.  The evaluator reads the recording word first (one load),
 * so between sessions an armed evaluator costs a call and a compare; the table
 * lookup happens only while a profile records.  Install, arm and the evaluator
 * run with the GIL held, so no lock is needed.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdlib.h>

#include "pyfunc_hooks.h"
#include "hotpath.h"
#include "ptr_table.h"

#if PY_VERSION_HEX >= 0x030B0000
typedef struct _PyInterpreterFrame pf_frame;
#else
#include <frameobject.h> /* 3.10: the frame struct, not in Python.h */
typedef PyFrameObject pf_frame;
#endif

#if PY_VERSION_HEX >= 0x030C0000
/* The unstable API names the frame's code (a strong reference, which the frame
 * also holds while it runs). */
static inline PyObject *pf_code_of(pf_frame *f)
{
    PyObject *code = PyUnstable_InterpreterFrame_GetCode(f);
    Py_XDECREF(code);
    return code;
}
#elif PY_VERSION_HEX >= 0x030B0000
/* 3.11 has no accessor: the head of Include/internal/pycore_frame.h's
 * _PyInterpreterFrame, checked at install by evaluating a known function. */
typedef struct {
    PyObject *f_func;
    PyObject *f_globals;
    PyObject *f_builtins;
    PyObject *f_locals;
    PyObject *f_code;
} pf_frame_head;
static inline PyObject *pf_code_of(pf_frame *f) { return ((pf_frame_head *)f)->f_code; }
#else
static inline PyObject *pf_code_of(pf_frame *f) { return (PyObject *)f->f_code; }
#endif

typedef struct pf_entry {
    PyObject *code; /* NULL: empty cell */
    uint32_t name;
    uint32_t option;
} pf_entry;

static pf_entry *g_pf;
static size_t g_pf_mask;
static int g_armed;
static _PyFrameEvalFunction g_prev;

static inline const pf_entry *pf_lookup(PyObject *code)
{
    return g_pf != NULL ? OPPROF_PTR_FIND(g_pf, g_pf_mask, code) : NULL;
}

static PyObject *pf_eval(PyThreadState *ts, pf_frame *f, int exc)
{
    uint32_t active = opprof_hot_active();
    if (!(active & OPPROF_ACTIVE_RECORDING))
        return g_prev(ts, f, exc);
    const pf_entry *e = pf_lookup(pf_code_of(f));
    opprof_thread *t;
    if (e == NULL || !(active & e->option) || (t = opprof_hot_thread()) == NULL)
        return g_prev(ts, f, exc);
    opprof_hot_begin_recording(t, active, e->name, OPPROF_KIND_NUMPY);
    PyObject *r = g_prev(ts, f, exc);
    opprof_hot_end(t, r == NULL ? OPPROF_FLAG_EXCEPTION : 0);
    return r;
}

/* ---- the install-time check of the frame layout ------------------------ */

static PyObject *g_probe_code;
static int g_probe_seen;
static int g_layout; /* the check's result: 0 not run yet, 1 right, -1 not */

static PyObject *pf_probe_eval(PyThreadState *ts, pf_frame *f, int exc)
{
    if (pf_code_of(f) == g_probe_code)
        g_probe_seen++;
    return _PyEval_EvalFrameDefault(ts, f, exc);
}

/* Evaluate a fresh function through a checking evaluator: the layout above is
 * right when the frame it sees names that function's code. */
static int pf_layout_ok(void)
{
    PyObject *globals = PyDict_New();
    if (globals == NULL)
        return 0;
    int ok = 0;
    PyObject *r =
        PyRun_String("def _opprof_probe():\n    return 7\n", Py_file_input, globals, globals);
    PyObject *fn = r != NULL ? PyDict_GetItemString(globals, "_opprof_probe") : NULL;
    if (fn != NULL && PyFunction_Check(fn)) {
        PyInterpreterState *interp = PyInterpreterState_Get();
        g_probe_code = PyFunction_GET_CODE(fn);
        g_probe_seen = 0;
        _PyInterpreterState_SetEvalFrameFunc(interp, pf_probe_eval);
        PyObject *seven = PyObject_CallNoArgs(fn);
        _PyInterpreterState_SetEvalFrameFunc(interp, _PyEval_EvalFrameDefault);
        ok = seven != NULL && PyLong_Check(seven) && PyLong_AsLong(seven) == 7 && g_probe_seen == 1;
        Py_XDECREF(seven);
        g_probe_code = NULL;
    }
    Py_XDECREF(r);
    Py_DECREF(globals);
    PyErr_Clear();
    return ok;
}

int opprof_pyfunc_supported(void)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int ok = 0;
    _PyFrameEvalFunction now = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get());
    if (now != _PyEval_EvalFrameDefault && now != pf_eval)
        opprof_fail(OPPROF_E_UNSUPPORTED,
                    "another frame evaluator (PEP 523: a debugger, torch.compile) is installed");
    else if (PY_VERSION_HEX >= 0x030E0000)
        opprof_fail(OPPROF_E_UNSUPPORTED, "not on Python %d.%d (3.10 to 3.13 only)",
                    PY_MAJOR_VERSION, PY_MINOR_VERSION);
    else {
        if (g_layout == 0 && now != pf_eval) /* checked once: a profile per block asks often */
            g_layout = pf_layout_ok() ? 1 : -1;
        ok = now == pf_eval || g_layout == 1;
        if (!ok)
            opprof_fail(OPPROF_E_UNSUPPORTED, "this Python's frame layout is not the one expected");
    }
    PyGILState_Release(g);
    return ok;
}

int opprof_pyfunc_install(const intptr_t *codes, const uint32_t *names, const uint32_t *options,
                          int64_t n)
{
    if (n < 0)
        return opprof_fail(OPPROF_E_ARG, "pyfunc install: negative count");
    size_t size = opprof_ptr_table_cells((size_t)n);
    pf_entry *table = calloc(size, sizeof *table);
    if (table == NULL)
        return opprof_fail(OPPROF_E_NOMEM, "no memory for %lld functions", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        PyObject *code = (PyObject *)codes[i];
        *OPPROF_PTR_PLACE(table, size - 1, code) = (pf_entry){code, names[i], options[i]};
    }
    PyGILState_STATE g = PyGILState_Ensure();
    /* An evaluator running now (the GIL is held here, so none can be mid-lookup)
     * reads its entry before calling on: the old table can go. */
    free(g_pf);
    g_pf = table;
    g_pf_mask = size - 1;
    PyGILState_Release(g);
    return OPPROF_OK;
}

int opprof_pyfunc_arm(int on, int64_t *foreign)
{
    PyGILState_STATE g = PyGILState_Ensure();
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction now = _PyInterpreterState_GetEvalFrameFunc(interp);
    *foreign = 0;
    if (on && !g_armed && g_pf != NULL) {
        if (now == _PyEval_EvalFrameDefault) {
            g_prev = now;
            _PyInterpreterState_SetEvalFrameFunc(interp, pf_eval);
            g_armed = 1;
        } else {
            *foreign = 1;
        }
    } else if (!on && g_armed) {
        if (now == pf_eval)
            _PyInterpreterState_SetEvalFrameFunc(interp, g_prev);
        else
            *foreign = 1; /* someone replaced ours: theirs stays */
        g_armed = 0;
    }
    PyGILState_Release(g);
    return OPPROF_OK;
}

int opprof_pyfunc_uninstall(void)
{
    int64_t foreign;
    opprof_pyfunc_arm(0, &foreign);
    PyGILState_STATE g = PyGILState_Ensure();
    free(g_pf);
    g_pf = NULL;
    PyGILState_Release(g);
    return OPPROF_OK;
}

int opprof_pyfunc_armed(void)
{
    PyGILState_STATE g = PyGILState_Ensure();
    int armed = _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == pf_eval;
    PyGILState_Release(g);
    return armed;
}
