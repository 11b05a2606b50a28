/* A one-round test's op summaries, built in one call from the round's sums.
 *
 * Most tests run one round, and their summary holds per op an OpSummary with
 * one-sample TimeStats.  Built in Python that took two objects and a dozen
 * attribute writes per op, twice (the round's figures, then the summary):
 * about a tenth of a profiled numpy test's added time.  Here the objects are
 * made directly, with the same types and values as gate.summary._one_round_op
 * makes, so every reader (verdict, spool, reports) sees the same summary.  The
 * objects are filled as object.__new__ and __dict__ writes fill them in
 * Python: the frozen dataclasses' __setattr__ is not called
 * (PyObject_GenericSetAttr is the plain attribute store).
 *
 * The field names come from the caller (the dataclasses' fields, in order):
 * this file knows what it fills in which place (one_round.h), not what the
 * fields are called, so a field renamed or added in Python needs no C, and a
 * layout that does not fit is refused with a message, not filled wrongly.
 */
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "opprof_internal.h"
#include "model_kernels.h"
#include "one_round.h"

enum { STATS_FIELDS = 7, OP_FIELDS = 11 };

static PyObject *zero; /* never released */

/* The types to build and the names of their fields, as one call was given them. */
typedef struct {
    PyTypeObject *op_type, *stats_type;
    PyObject *const *op_names;    /* OP_FIELDS str, borrowed from the caller's tuple */
    PyObject *const *stats_names; /* STATS_FIELDS str */
    PyObject *no_args;            /* () for tp_new */
} Layout;

/* The n names of a tuple of str, or NULL with TypeError naming what is filled. */
static PyObject *const *names_of(PyObject *names, Py_ssize_t n, const char *fn, const char *what)
{
    int fits = PyTuple_CheckExact(names) && PyTuple_GET_SIZE(names) == n;
    for (Py_ssize_t i = 0; fits && i < n; i++)
        fits = PyUnicode_CheckExact(PyTuple_GET_ITEM(names, i));
    if (!fits) {
        PyErr_Format(PyExc_TypeError,
                     "%s: expected a tuple of the %zd field names it fills (%s), got %R", fn, n,
                     what, names);
        return NULL;
    }
    return &PyTuple_GET_ITEM(names, 0);
}

static const char op_fields_text[] = "the key, count, self CPU time, CPU time, self bytes, bytes, "
                                     "FLOPs, self device time, device time, ranges, "
                                     "self device bytes";
static const char stats_fields_text[] = "the samples, median, min, max, mean, stdev, MAD";

/* Fill layout from the four arguments at args (op_type, op_names, stats_type,
 * stats_names); 0, or -1 with an exception set. */
static int layout_of(Layout *layout, PyObject *const *args, const char *fn)
{
    if (!PyType_Check(args[0]) || !PyType_Check(args[2])) {
        PyErr_Format(PyExc_TypeError, "%s: expected the op and time statistics types", fn);
        return -1;
    }
    layout->op_type = (PyTypeObject *)args[0];
    layout->stats_type = (PyTypeObject *)args[2];
    layout->op_names = names_of(args[1], OP_FIELDS, fn, op_fields_text);
    layout->stats_names =
        layout->op_names != NULL ? names_of(args[3], STATS_FIELDS, fn, stats_fields_text) : NULL;
    if (layout->stats_names == NULL)
        return -1;
    if (zero == NULL && (zero = PyLong_FromLong(0)) == NULL)
        return -1;
    layout->no_args = PyTuple_New(0);
    return layout->no_args == NULL ? -1 : 0;
}

/* A new instance of type without calling its __init__ (object.__new__). */
static PyObject *bare(PyTypeObject *type, PyObject *no_args)
{
    return type->tp_new(type, no_args, NULL);
}

/* Set each names[i] to values[i], stealing the references to values (all of
 * them, also on failure); 0 or -1. */
static int fill(PyObject *obj, PyObject *const *names, PyObject **values, int n)
{
    int status = 0;
    for (int i = 0; i < n; i++) {
        if (status == 0 && (values[i] == NULL || PyObject_GenericSetAttr(obj, names[i], values[i])))
            status = -1;
        Py_XDECREF(values[i]);
    }
    return status;
}

/* A new OpSummary holding values (stolen, all of them, also on failure); with
 * make 0 (an earlier step failed) none is made and the values are dropped. */
static PyObject *new_op(const Layout *layout, PyObject **values, int make)
{
    PyObject *op = make ? bare(layout->op_type, layout->no_args) : NULL;
    if (op == NULL) {
        for (int i = 0; i < OP_FIELDS; i++)
            Py_XDECREF(values[i]);
        return NULL;
    }
    if (fill(op, layout->op_names, values, OP_FIELDS) != 0) {
        Py_DECREF(op);
        return NULL;
    }
    return op;
}

/* TimeStats.single(ns). */
static PyObject *single(const Layout *layout, int64_t ns)
{
    PyObject *value = PyLong_FromLongLong(ns);
    if (value == NULL)
        return NULL;
    PyObject *stats = bare(layout->stats_type, layout->no_args);
    if (stats == NULL) {
        Py_DECREF(value);
        return NULL;
    }
    PyObject *samples = PyTuple_Pack(1, value); /* the tuple takes its own reference */
    /* Four references to value (median, min, max, mean), two to zero: fill steals them. */
    Py_INCREF(value);
    Py_INCREF(value);
    Py_INCREF(value);
    Py_INCREF(zero);
    Py_INCREF(zero);
    PyObject *values[STATS_FIELDS] = {samples, value, value, value, value, zero, zero};
    if (fill(stats, layout->stats_names, values, STATS_FIELDS) != 0) {
        Py_DECREF(stats);
        return NULL;
    }
    return stats;
}

static PyObject *one_op(PyObject *key, const int64_t *row, const Layout *layout)
{
    PyObject *self_cpu = single(layout, row[OPPROF_GROUP_CPU_SELF]);
    if (self_cpu == NULL)
        return NULL;
    PyObject *total;
    if (row[OPPROF_GROUP_CPU_TOTAL] == row[OPPROF_GROUP_CPU_SELF]) {
        /* An op that called no other op: one object, as _one_round_op shares it. */
        Py_INCREF(self_cpu);
        total = self_cpu;
    } else {
        total = single(layout, row[OPPROF_GROUP_CPU_TOTAL]);
    }
    PyObject *self_device = Py_None, *device = Py_None;
    if (row[OPPROF_GROUP_DEVICE_TOTAL] != 0 || row[OPPROF_GROUP_DEVICE_SELF] != 0) {
        self_device = single(layout, row[OPPROF_GROUP_DEVICE_SELF]);
        device = single(layout, row[OPPROF_GROUP_DEVICE_TOTAL]);
    } else {
        Py_INCREF(Py_None);
        Py_INCREF(Py_None);
    }
    Py_INCREF(key);
    Py_INCREF(zero);
    PyObject *values[OP_FIELDS] = {
        key,
        PyLong_FromLongLong(row[OPPROF_GROUP_COUNT]),
        self_cpu,
        total,
        PyLong_FromLongLong(row[OPPROF_GROUP_MEM_SELF]),
        PyLong_FromLongLong(row[OPPROF_GROUP_MEM_TOTAL]),
        PyLong_FromLongLong(row[OPPROF_GROUP_FLOPS]),
        self_device,
        device,
        PyDict_New(),
        zero, /* device memory: the sums carry none (records with it take Python's path) */
    };
    return new_op(layout, values, 1);
}

/* one_round_ops(keys, sums, memory_key, exact, op_type, op_names, stats_type,
 * stats_names): see one_round.h. */
static PyObject *one_round_ops(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 8 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError,
                        "one_round_ops(keys: list, sums, memory_key, exact: int, op_type: type, "
                        "op_names: tuple, stats_type: type, stats_names: tuple)");
        return NULL;
    }
    PyObject *keys = args[0], *memory_key = args[2];
    Layout layout = {0};
    long long exact = PyLong_AsLongLong(args[3]);
    if (exact == -1 && PyErr_Occurred())
        return NULL;
    if (layout_of(&layout, args + 4, "one_round_ops") != 0)
        return NULL;
    Py_ssize_t n = PyList_GET_SIZE(keys);
    PyObject *result = NULL, *where = NULL, *order = NULL, *ops = NULL;
    int64_t *sums = PyMem_Malloc((size_t)(n > 0 ? n : 1) * OPPROF_GROUP_COLUMNS * sizeof *sums);
    if (sums == NULL) {
        Py_DECREF(layout.no_args);
        return PyErr_NoMemory();
    }
    if (!PyList_Check(args[1]) || PyList_GET_SIZE(args[1]) != n) {
        PyErr_SetString(PyExc_ValueError, "one_round_ops: sums must be a list, one row per key");
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *row = PySequence_Fast(PyList_GET_ITEM(args[1], i), "one_round_ops: a row");
        if (row == NULL)
            goto done;
        int usable = PySequence_Fast_GET_SIZE(row) == OPPROF_GROUP_COLUMNS;
        for (Py_ssize_t c = 0; usable && c < OPPROF_GROUP_COLUMNS; c++) {
            int overflow = 0;
            long long v = PyLong_AsLongLongAndOverflow(PySequence_Fast_GET_ITEM(row, c), &overflow);
            if (v == -1 && PyErr_Occurred()) {
                PyErr_Clear();
                usable = 0;
            }
            /* Beyond exact: the float arithmetic of the rows, which Python does. */
            usable = usable && !overflow && -exact < v && v < exact;
            sums[i * OPPROF_GROUP_COLUMNS + c] = v;
        }
        Py_DECREF(row);
        if (!usable) {
            result = Py_None;
            Py_INCREF(result);
            goto done;
        }
    }
    /* Key -> row, to find each row again in key order (and to see repeats). */
    if ((where = PyDict_New()) == NULL || (order = PyList_New(n)) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *key = PyList_GET_ITEM(keys, i);
        PyObject *row = PyLong_FromSsize_t(i);
        if (row == NULL || PyDict_SetItem(where, key, row) != 0) {
            Py_XDECREF(row);
            goto done;
        }
        Py_DECREF(row);
        Py_INCREF(key);
        PyList_SET_ITEM(order, i, key);
    }
    if (PyDict_GET_SIZE(where) != n) { /* a repeated key sums its rows: Python's */
        result = Py_None;
        Py_INCREF(result);
        goto done;
    }
    if (PyList_Sort(order) != 0 || (ops = PyDict_New()) == NULL)
        goto done;
    long long op_count = 0, self_flops = 0, device_ns = 0;
    int has_device = 0;
    for (Py_ssize_t j = 0; j < n; j++) {
        PyObject *key = PyList_GET_ITEM(order, j);
        PyObject *at = PyDict_GetItemWithError(where, key); /* borrowed */
        Py_ssize_t i = at != NULL ? PyLong_AsSsize_t(at) : -1;
        if (i < 0) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "one_round_ops: a key changed while sorting");
            goto done;
        }
        const int64_t *row = sums + i * OPPROF_GROUP_COLUMNS;
        PyObject *op = one_op(key, row, &layout);
        if (op == NULL)
            goto done;
        int failed = PyDict_SetItem(ops, key, op);
        Py_DECREF(op);
        if (failed)
            goto done;
        int is_memory = PyObject_RichCompareBool(key, memory_key, Py_EQ);
        if (is_memory < 0)
            goto done;
        if (!is_memory)
            op_count += row[OPPROF_GROUP_COUNT];
        self_flops += row[OPPROF_GROUP_SELF_FLOPS];
        device_ns += row[OPPROF_GROUP_DEVICE_SELF];
        has_device |= row[OPPROF_GROUP_DEVICE_TOTAL] != 0 || row[OPPROF_GROUP_DEVICE_SELF] != 0;
    }
    /* n rows under 2**50 each: the sums cannot overflow. */
    if (has_device)
        result = Py_BuildValue("(OLLL)", ops, op_count, self_flops, device_ns);
    else
        result = Py_BuildValue("(OLLO)", ops, op_count, self_flops, Py_None);
done:
    PyMem_Free(sums);
    Py_XDECREF(where);
    Py_XDECREF(order);
    Py_XDECREF(ops);
    Py_DECREF(layout.no_args);
    return result;
}

/* jsonio.round_sig(v): v to three significant digits, as Python rounds an int
 * (math.log10 of the value as a double, then round(v, 2 - exponent): half to
 * even, exact on the integer). */
static int64_t round_sig(int64_t v)
{
    if (v == 0)
        return 0;
    int64_t a = v < 0 ? -v : v;
    int exponent = (int)floor(log10((double)a));
    int k = exponent - 2; /* digits to drop */
    if (k <= 0)
        return v;
    if (k > 18)
        return 0; /* unreachable for an int64: 10**19 exceeds every value */
    int64_t p = 1;
    for (int i = 0; i < k; i++)
        p *= 10;
    int64_t q = a / p, r = a % p;
    if (r > p - r || (r == p - r && (q & 1)))
        q++;
    int64_t rounded = q * p;
    return v < 0 ? -rounded : rounded;
}

/* The ns of a one-sample TimeStats (what single() makes), or -1 with *ok = 0
 * for anything else (then Python rounds it). */
static int64_t single_ns(PyObject *stats, const Layout *layout, int *ok)
{
    int64_t ns = 0;
    if (Py_TYPE(stats) != layout->stats_type) {
        *ok = 0;
        return -1;
    }
    PyObject *v[STATS_FIELDS];
    for (int i = 0; i < STATS_FIELDS; i++) {
        v[i] = PyObject_GenericGetAttr(stats, layout->stats_names[i]);
        if (v[i] == NULL) {
            PyErr_Clear();
            *ok = 0;
        }
    }
    if (*ok && PyTuple_CheckExact(v[0]) && PyTuple_GET_SIZE(v[0]) == 1) {
        PyObject *sample = PyTuple_GET_ITEM(v[0], 0);
        int overflow = 0;
        ns = PyLong_CheckExact(sample) ? PyLong_AsLongLongAndOverflow(sample, &overflow) : 0;
        *ok = PyLong_CheckExact(sample) && !overflow && !(ns == -1 && PyErr_Occurred());
        for (int i = 1; *ok && i < STATS_FIELDS; i++) {
            long long want = i < 5 ? ns : 0; /* median, min, max, mean; stdev, mad */
            *ok = PyLong_CheckExact(v[i]) &&
                  PyLong_AsLongLongAndOverflow(v[i], &overflow) == want && !overflow;
        }
        PyErr_Clear();
    } else {
        *ok = 0;
    }
    for (int i = 0; i < STATS_FIELDS; i++)
        Py_XDECREF(v[i]);
    return ns;
}

/* The stored (rounded) form of a one-sample TimeStats, or NULL with *ok = 0. */
static PyObject *stored_single(PyObject *stats, const Layout *layout, int *ok)
{
    int64_t ns = single_ns(stats, layout, ok);
    return *ok ? single(layout, round_sig(ns)) : NULL;
}

/* OpSummary.as_stored of an op whose times have one sample each; NULL with
 * *ok = 0 where Python must do it (or with *ok = 1 and an exception set). */
static PyObject *stored_op(PyObject *op, const Layout *layout, int *ok)
{
    if (Py_TYPE(op) != layout->op_type) {
        *ok = 0;
        return NULL;
    }
    PyObject *values[OP_FIELDS];
    for (int i = 0; i < OP_FIELDS; i++)
        if ((values[i] = PyObject_GenericGetAttr(op, layout->op_names[i])) == NULL) {
            for (int j = 0; j < i; j++)
                Py_DECREF(values[j]);
            PyErr_Clear();
            *ok = 0;
            return NULL;
        }
    enum { SELF_CPU = 2, CPU = 3, SELF_DEVICE = 7, DEVICE = 8 };
    PyObject *self_cpu = values[SELF_CPU], *cpu = values[CPU];
    PyObject *self_device = values[SELF_DEVICE], *device = values[DEVICE];
    int paired = self_device != Py_None && device != Py_None;
    values[SELF_CPU] = stored_single(self_cpu, layout, ok);
    /* One object for both times (an op that called no other op): rounded once. */
    if (cpu == self_cpu) {
        values[CPU] = values[SELF_CPU];
        Py_XINCREF(values[CPU]);
    } else if (cpu == Py_None) {
        values[CPU] = Py_None;
        Py_INCREF(Py_None);
    } else {
        values[CPU] = *ok ? stored_single(cpu, layout, ok) : NULL;
    }
    if (paired) {
        values[SELF_DEVICE] = *ok ? stored_single(self_device, layout, ok) : NULL;
        values[DEVICE] = *ok ? stored_single(device, layout, ok) : NULL;
    } else { /* device times travel as a pair or not at all */
        values[SELF_DEVICE] = Py_None;
        values[DEVICE] = Py_None;
        Py_INCREF(Py_None);
        Py_INCREF(Py_None);
    }
    Py_DECREF(self_cpu);
    Py_DECREF(cpu);
    Py_DECREF(self_device);
    Py_DECREF(device);
    return new_op(layout, values, *ok);
}

/* stored_ops(ops, op_type, op_names, stats_type, stats_names) -> dict or None:
 * see one_round.h. */
static PyObject *stored_ops(PyObject *self, PyObject *const *args, Py_ssize_t nargs)
{
    (void)self;
    if (nargs != 5 || !PyDict_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "stored_ops(ops: dict, op_type: type, op_names: tuple, "
                                         "stats_type: type, stats_names: tuple)");
        return NULL;
    }
    Layout layout = {0};
    if (layout_of(&layout, args + 1, "stored_ops") != 0)
        return NULL;
    PyObject *ops = args[0], *no_args = layout.no_args;
    PyObject *keys = PyDict_Keys(ops), *out = NULL;
    if (keys == NULL || PyList_Sort(keys) != 0 || (out = PyDict_New()) == NULL)
        goto failed;
    for (Py_ssize_t j = 0; j < PyList_GET_SIZE(keys); j++) {
        PyObject *key = PyList_GET_ITEM(keys, j);
        PyObject *op = PyDict_GetItemWithError(ops, key); /* borrowed */
        if (op == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "stored_ops: the ops changed while read");
            goto failed;
        }
        int ok = 1;
        PyObject *stored = stored_op(op, &layout, &ok);
        if (!ok) { /* more than one sample somewhere: Python's */
            Py_XDECREF(stored);
            Py_DECREF(out);
            Py_DECREF(keys);
            Py_DECREF(no_args);
            PyErr_Clear();
            Py_RETURN_NONE;
        }
        if (stored == NULL || PyDict_SetItem(out, key, stored) != 0) {
            Py_XDECREF(stored);
            goto failed;
        }
        Py_DECREF(stored);
    }
    Py_DECREF(keys);
    Py_DECREF(no_args);
    return out;
failed:
    Py_XDECREF(keys);
    Py_XDECREF(no_args);
    Py_XDECREF(out);
    return NULL;
}

/* Static: each function object keeps a pointer to its entry (m_ml). */
static PyMethodDef summary_defs[] = {
    {"one_round_ops", (PyCFunction)(void (*)(void))one_round_ops, METH_FASTCALL,
     "A one-round test's OpSummary per key from its round's sums (native/one_round.h)."},
    {"stored_ops", (PyCFunction)(void (*)(void))stored_ops, METH_FASTCALL,
     "The stored form of one-sample op summaries, in key order (native/one_round.h)."},
};

int opprof_install_summary_functions(intptr_t module_id)
{
    /* cffi released the GIL around this call. */
    PyGILState_STATE g = PyGILState_Ensure();
    int status = OPPROF_OK;
    for (size_t i = 0; i < sizeof summary_defs / sizeof summary_defs[0]; i++) {
        PyObject *fn = PyCFunction_NewEx(&summary_defs[i], NULL, NULL);
        if (fn == NULL ||
            PyObject_SetAttrString((PyObject *)module_id, summary_defs[i].ml_name, fn)) {
            Py_XDECREF(fn);
            PyErr_Clear();
            status =
                opprof_fail(OPPROF_E_PYTHON, "opprof_install_summary_functions: could not set %s",
                            summary_defs[i].ml_name);
            break;
        }
        Py_DECREF(fn);
    }
    PyGILState_Release(g);
    return status;
}
