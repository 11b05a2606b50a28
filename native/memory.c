/* Memory accounting, the NEP 49 numpy data-memory handler, and
 * opprof_memory_stats_get.  It counts through memory_count.h (counters in
 * memory_count.c, which also hold the counting model) as the Python
 * allocator hooks in memory_pymem.c do; the stats read both hooks' install
 * counts, so this file sits on top: memory_count.c <- memory_pymem.c <-
 * memory.c.
 *
 * Why a header on every numpy block: numpy's free(ptr, size) argument does
 * not always match the allocated size, and realloc gives no old size at all;
 * the 16-byte header (size, window tag, the allocating op's slot) makes both exact and keeps malloc's
 * 16-byte alignment.
 *
 * Why the context-variable default is changed: numpy keeps the handler in a
 * contextvars.ContextVar.  PyDataMem_SetHandler only sets it in the calling
 * context; a thread started later begins with an empty context and reads
 * the variable's default (numpy's default handler), so its arrays would
 * escape.  We find that ContextVar object (set a handler in a fresh
 * throw-away context and look for the key holding it), check that CPython's
 * layout puts the default where we expect (the slot must hold exactly the
 * value an empty context reads), and swap the default to our handler while
 * installed (the default is never cached by CPython: only values found in
 * a context are).  Limits: a context that set a handler explicitly keeps its
 * own (we also set ours in the installing context, and put its handler back
 * at uninstall if ours is still in effect there); blocks allocated before
 * install belong to numpy's handler and are never seen; when the layout
 * check fails only the installing context is covered (threads_covered = 0).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#define NPY_NO_DEPRECATED_API NPY_1_22_API_VERSION
#include <numpy/arrayobject.h>

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "opprof_internal.h"
#include "memory.h"
#include "memory_count.h"

static int g_installed;
static int g_threads_covered;

int opprof_memory_stats_get(opprof_memory_stats *out)
{
    if (out == NULL) {
        return opprof_fail(OPPROF_E_ARG, "opprof_memory_stats_get: out is NULL");
    }
    opprof_mem_count_stats(out);
    out->installed = g_installed;
    out->threads_covered = g_threads_covered;
    out->python_installed = opprof_mem_python_install_count();
    out->python_untracked = opprof_mem_python_untracked();
    return OPPROF_OK;
}

/* ---- the numpy handler ------------------------------------------------- */

typedef struct {
    uint64_t word; /* bytes the caller asked for (SIZE_BITS), the block's lead and alignment */
    uint32_t tag;  /* window the block was allocated in while recording, 0 = none */
    uint32_t slot; /* its op's slot in the held-bytes table (memory_count.h) */
} block_header;

_Static_assert(sizeof(block_header) == 16, "the header must keep malloc's 16-byte alignment");

/* Blocks at a cache line (opprof_memory_align): how fast numpy's loops run
 * depends on where their operands start, and malloc starts a block wherever
 * its heap's history left room, 16-byte aligned: at any of four places in a
 * cache line.  np.add of 240 KB operands ran up to 2.85x as long at one
 * placement as at another, 1.81x with each at a line (bench/ab_placement.py).
 * Two processes whose heaps went different ways then run the same op at
 * different speeds for a whole run (docs/how-it-works.md, "Where a block
 * starts").  Aligned, every block starts at a cache line in every process.
 *
 * The header's word: the size in its low SIZE_BITS bits, then the lead (bytes
 * from the inner block's start to the data, in 16s) and whether the block is
 * aligned, so free and realloc find the inner block and its size whatever
 * the setting is by then. */
#define SIZE_BITS 48
#define SIZE_MAX_BLOCK ((UINT64_C(1) << SIZE_BITS) - 1)
#define LEAD_SHIFT SIZE_BITS
#define LEAD_MASK UINT64_C(0xF)
#define ALIGNED_BIT (UINT64_C(1) << 63)
#define LINE 64

static int g_align; /* opprof_memory_align's setting */

/* The inner block's size for `size` bytes: the header, and room to reach a line. */
static size_t inner_size(uint64_t size, int aligned)
{
    return (size_t)size + (aligned ? LINE : sizeof(block_header));
}

static uint64_t block_size(const block_header *h) { return h->word & SIZE_MAX_BLOCK; }

static int block_aligned(const block_header *h) { return (h->word & ALIGNED_BIT) != 0; }

static char *block_inner(const block_header *h)
{
    return (char *)(h + 1) - 16 * (size_t)((h->word >> LEAD_SHIFT) & LEAD_MASK);
}

/* The header of a block placed in `inner` (of inner_size(size, aligned) bytes). */
static block_header *place(char *inner, uint64_t size, int aligned)
{
    uintptr_t data = (uintptr_t)inner + sizeof(block_header);
    if (aligned) {
        data = (data + LINE - 1) & ~(uintptr_t)(LINE - 1);
    }
    block_header *h = (block_header *)data - 1;
    uint64_t lead = (data - (uintptr_t)inner) / 16;
    h->word = size | (lead << LEAD_SHIFT) | (aligned ? ALIGNED_BIT : 0);
    return h;
}

int opprof_memory_align(int on)
{
    g_align = on != 0;
    return OPPROF_OK;
}

/* One wrapper per distinct inner handler (normally just numpy's default).
 * Static storage: arrays keep a reference to their handler capsule and may
 * outlive any install, so nothing here is ever freed. */
typedef struct {
    PyDataMem_Handler handler; /* what numpy calls; allocator.ctx points at this wrapper */
    PyDataMemAllocator inner;  /* copy of the wrapped handler's allocator */
    PyObject *inner_capsule;   /* strong reference: keeps inner's ctx alive */
    PyObject *capsule;         /* strong reference, never released */
} wrapper;

#define MAX_WRAPPERS 8
static wrapper g_wrappers[MAX_WRAPPERS];
static int g_nwrappers;

/* Counts a new block's allocation in its header; NULL passes through. */
static void *stamp(block_header *h)
{
    if (h == NULL) {
        return NULL;
    }
    int64_t size = (int64_t)block_size(h);
    h->tag = opprof_mem_count_alloc(size);
    h->slot = 0;
    if (h->tag != 0) {
        h->slot = opprof_mem_held_slot();
        opprof_mem_held_move(h->slot, size);
    }
    return h + 1;
}

static void *wrap_malloc(void *ctx, size_t size)
{
    wrapper *w = ctx;
    if (size > SIZE_MAX_BLOCK) {
        return NULL;
    }
    int aligned = g_align;
    char *inner = w->inner.malloc(w->inner.ctx, inner_size(size, aligned));
    return inner ? stamp(place(inner, size, aligned)) : NULL;
}

static void *wrap_calloc(void *ctx, size_t nelem, size_t elsize)
{
    wrapper *w = ctx;
    if (elsize != 0 && nelem > SIZE_MAX_BLOCK / elsize) {
        return NULL;
    }
    size_t size = nelem * elsize;
    int aligned = g_align;
    char *inner = w->inner.calloc(w->inner.ctx, 1, inner_size(size, aligned));
    return inner ? stamp(place(inner, size, aligned)) : NULL;
}

/* A block moved to `new_size` bytes: the inner realloc where the block is and
 * stays where malloc puts it, else a new aligned block, copied (an inner
 * realloc keeps the data at its old lead, off the new block's line). */
static block_header *move_block(wrapper *w, block_header *old, size_t new_size)
{
    uint64_t old_size = block_size(old);
    int old_aligned = block_aligned(old);
    int aligned = g_align;
    if (!old_aligned && !aligned) {
        char *inner = w->inner.realloc(w->inner.ctx, block_inner(old), inner_size(new_size, 0));
        return inner ? place(inner, new_size, 0) : NULL;
    }
    char *inner = w->inner.malloc(w->inner.ctx, inner_size(new_size, aligned));
    if (inner == NULL) {
        return NULL;
    }
    block_header *h = place(inner, new_size, aligned);
    memcpy(h + 1, old + 1, old_size < new_size ? (size_t)old_size : new_size);
    w->inner.free(w->inner.ctx, block_inner(old), inner_size(old_size, old_aligned));
    return h;
}

static void *wrap_realloc(void *ctx, void *ptr, size_t new_size)
{
    wrapper *w = ctx;
    if (ptr == NULL) {
        return wrap_malloc(ctx, new_size);
    }
    if (new_size > SIZE_MAX_BLOCK) {
        return NULL;
    }
    block_header *old = (block_header *)ptr - 1;
    uint64_t old_size = block_size(old);
    uint32_t old_tag = old->tag;
    uint32_t old_slot = old->slot;
    block_header *h = move_block(w, old, new_size);
    if (h == NULL) {
        return NULL; /* the old block is untouched and still counted */
    }
    if (old_tag != 0 && old_tag == opprof_mem_window()) {
        opprof_mem_held_move(old_slot, -(int64_t)old_size);
    }
    h->tag = opprof_mem_count_realloc((int64_t)old_size, (int64_t)new_size, old_tag);
    h->slot = 0;
    if (h->tag != 0) {
        h->slot = opprof_mem_held_slot();
        opprof_mem_held_move(h->slot, (int64_t)new_size);
    }
    return h + 1;
}

static void wrap_free(void *ctx, void *ptr, size_t size_hint)
{
    (void)size_hint; /* numpy's size can disagree with the block's: the header's is exact */
    wrapper *w = ctx;
    if (ptr == NULL) {
        return;
    }
    block_header *h = (block_header *)ptr - 1;
    uint64_t size = block_size(h);
    if (h->tag != 0 && h->tag == opprof_mem_window()) {
        opprof_mem_held_move(h->slot, -(int64_t)size);
    }
    opprof_mem_count_free((int64_t)size, h->tag);
    /* The inner handler gets the size it allocated (numpy's default handler
     * files small blocks in its cache by this size). */
    w->inner.free(w->inner.ctx, block_inner(h), inner_size(size, block_aligned(h)));
}

static int is_ours(PyObject *capsule)
{
    for (int i = 0; i < g_nwrappers; i++) {
        if (g_wrappers[i].capsule == capsule) {
            return 1;
        }
    }
    return 0;
}

/* The wrapper around `inner` (a handler capsule), created on first use.
 * GIL held.  Returns a borrowed reference (wrappers live forever). */
static PyObject *wrapper_for(PyObject *inner)
{
    if (is_ours(inner)) {
        return inner;
    }
    for (int i = 0; i < g_nwrappers; i++) {
        if (g_wrappers[i].inner_capsule == inner) {
            return g_wrappers[i].capsule;
        }
    }
    if (g_nwrappers == MAX_WRAPPERS) {
        opprof_fail(OPPROF_E_HOOK, "more than %d distinct numpy memory handlers seen",
                    MAX_WRAPPERS);
        return NULL;
    }
    PyDataMem_Handler *in = PyCapsule_GetPointer(inner, "mem_handler");
    if (in == NULL) {
        PyErr_Clear();
        opprof_fail(OPPROF_E_HOOK, "numpy's current memory handler is not a 'mem_handler' capsule");
        return NULL;
    }
    wrapper *w = &g_wrappers[g_nwrappers];
    memset(w, 0, sizeof(*w));
    /* The name numpy would report without us (get_handler_name() in a new
     * thread, on an array): tests compare it, e.g. numpy's own
     * test_mem_policy.py::test_thread_locality expects "default_allocator". */
    snprintf(w->handler.name, sizeof(w->handler.name), "%s", in->name);
    w->handler.version = 1;
    w->handler.allocator.ctx = w;
    w->handler.allocator.malloc = wrap_malloc;
    w->handler.allocator.calloc = wrap_calloc;
    w->handler.allocator.realloc = wrap_realloc;
    w->handler.allocator.free = wrap_free;
    w->inner = in->allocator;
    w->capsule = PyCapsule_New(&w->handler, "mem_handler", NULL);
    if (w->capsule == NULL) {
        PyErr_Clear();
        opprof_fail(OPPROF_E_NOMEM, "could not create the numpy memory handler capsule");
        return NULL;
    }
    Py_INCREF(inner);
    w->inner_capsule = inner;
    g_nwrappers++;
    return w->capsule;
}

/* ---- the context variable holding numpy's handler ---------------------- */

/* CPython's PyContextVar starts with these fields in 3.10 to 3.13; verified
 * at run time before use (see find_handler_var). */
typedef struct {
    PyObject_HEAD PyObject *var_name;
    PyObject *var_default;
} ctxvar_head;

static PyObject *g_var;         /* numpy's ContextVar, strong reference; NULL if unusable */
static PyObject *g_var_default; /* its original default while ours is swapped in */
static int g_var_probed;

/* Set our wrapper of the default handler in a fresh empty context and find
 * the ContextVar whose value it became.  GIL held.  Leaves g_var NULL when
 * anything does not match. */
static void find_handler_var(void)
{
    g_var_probed = 1;
    PyObject *ctx = PyContext_New();
    if (ctx == NULL || PyContext_Enter(ctx) < 0) {
        Py_XDECREF(ctx);
        PyErr_Clear();
        return;
    }
    PyObject *dflt = PyDataMem_GetHandler(); /* what an empty context reads */
    PyObject *probe = dflt ? wrapper_for(dflt) : NULL;
    PyObject *prev = probe ? PyDataMem_SetHandler(probe) : NULL;
    PyObject *snap = prev ? PyContext_CopyCurrent() : NULL;
    PyContext_Exit(ctx);
    Py_DECREF(ctx);
    PyObject *it = snap ? PyObject_GetIter(snap) : NULL;
    PyObject *key;
    while (it != NULL && (key = PyIter_Next(it)) != NULL) {
        PyObject *val = PyContextVar_CheckExact(key) ? PyObject_GetItem(snap, key) : NULL;
        ctxvar_head *v = (ctxvar_head *)key;
        if (val == probe && v->var_default == dflt && v->var_name && PyUnicode_Check(v->var_name)) {
            g_var = key;
            Py_INCREF(g_var);
        }
        Py_XDECREF(val);
        Py_DECREF(key);
    }
    Py_XDECREF(it);
    Py_XDECREF(snap);
    Py_XDECREF(prev);
    Py_XDECREF(dflt);
    PyErr_Clear();
}

/* Handler set explicitly in the installing context, restored at uninstall. */
static PyObject *g_ctx_prev; /* strong reference; NULL when we did not set one */
static PyObject *g_ctx_ours; /* the wrapper we set there (borrowed: lives forever) */

static int ensure_numpy_api(void)
{
    static int imported;
    if (!imported) {
        if (_import_array() < 0) {
            PyErr_Clear();
            return opprof_fail(OPPROF_E_UNSUPPORTED, "numpy's C API could not be imported");
        }
        imported = 1;
    }
    return OPPROF_OK;
}

static int context_has_var(void)
{
    PyObject *snap = PyContext_CopyCurrent();
    int has = snap ? PySequence_Contains(snap, g_var) : -1;
    Py_XDECREF(snap);
    if (has < 0) {
        PyErr_Clear();
        return 0;
    }
    return has;
}

static int install_locked(void)
{
    int rc = ensure_numpy_api();
    if (rc != OPPROF_OK) {
        return rc;
    }
    if (!g_var_probed) {
        find_handler_var();
    }
    if (g_var != NULL) {
        ctxvar_head *v = (ctxvar_head *)g_var;
        PyObject *ours = wrapper_for(v->var_default);
        if (ours == NULL) {
            return OPPROF_E_HOOK;
        }
        if (ours != v->var_default) {
            g_var_default = v->var_default; /* the variable's reference becomes ours */
            Py_INCREF(ours);
            v->var_default = ours;
        }
        g_threads_covered = 1;
    }
    /* The installing context: set ours explicitly when the default does not
     * reach it (no usable variable, or a handler set explicitly here). */
    if (g_var == NULL || context_has_var()) {
        PyObject *cur = PyDataMem_GetHandler();
        PyObject *ours = cur ? wrapper_for(cur) : NULL;
        if (cur != NULL && ours != NULL && ours != cur) {
            PyObject *prev = PyDataMem_SetHandler(ours);
            if (prev == NULL) {
                PyErr_Clear();
                Py_DECREF(cur);
                return opprof_fail(OPPROF_E_HOOK, "PyDataMem_SetHandler failed");
            }
            g_ctx_prev = prev;
            g_ctx_ours = ours;
        }
        Py_XDECREF(cur);
        if (ours == NULL) {
            PyErr_Clear();
            return OPPROF_E_HOOK;
        }
    }
    return OPPROF_OK;
}

static void uninstall_locked(void)
{
    if (g_var != NULL && g_var_default != NULL) {
        ctxvar_head *v = (ctxvar_head *)g_var;
        PyObject *ours = v->var_default;
        v->var_default = g_var_default;
        g_var_default = NULL;
        Py_DECREF(ours);
    }
    g_threads_covered = 0;
    if (g_ctx_prev != NULL) {
        /* Only where ours is still in effect: another context, or a handler
         * someone set after us, is left alone. */
        PyObject *cur = PyDataMem_GetHandler();
        if (cur == g_ctx_ours) {
            PyObject *ret = PyDataMem_SetHandler(g_ctx_prev);
            Py_XDECREF(ret);
        }
        Py_XDECREF(cur);
        Py_CLEAR(g_ctx_prev);
        g_ctx_ours = NULL;
        PyErr_Clear();
    }
}

int opprof_memory_install(void)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    int rc = OPPROF_OK;
    if (g_installed == 0) {
        rc = install_locked();
        if (rc != OPPROF_OK) {
            uninstall_locked();
        }
    }
    if (rc == OPPROF_OK) {
        g_installed++;
    }
    PyGILState_Release(gs);
    return rc;
}

int opprof_memory_uninstall(void)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    int rc = OPPROF_OK;
    if (g_installed == 0) {
        rc = opprof_fail(OPPROF_E_STATE, "the numpy memory handler is not installed");
    } else if (--g_installed == 0) {
        uninstall_locked();
    }
    PyGILState_Release(gs);
    return rc;
}
