/* Counting hooks for Python's PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ
 * allocators (optional: profile(python_memory=True)).
 *
 * Why no size header here (unlike the numpy handler): objects allocated
 * before the hooks go in are freed through them, and objects allocated under
 * them are freed after they come out, by the allocator underneath.  Blocks
 * must therefore be exactly the inner allocator's blocks; sizes live in an
 * open-addressing pointer -> size table instead (what tracemalloc does).
 * Both domains require the GIL, so the table needs no lock.  A pointer the
 * table does not know was allocated before install: its free is not counted.
 *
 * Why the hooks can be left behind: a hook installed on top of ours
 * (tracemalloc started during a run) keeps calling ours, and restoring the
 * allocator under ours would cut it out.  So an uninstall that does not find
 * ours on top changes nothing in the chain and detaches instead: the hooks
 * pass every call straight through from then on (they and their context stay
 * valid for the process's life), and the next install takes a fresh context
 * slot, so a detached copy never calls into a newer one.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <stdlib.h>
#include <string.h>

#include "opprof_internal.h"
#include "memory.h"
#include "memory_count.h"

#define SIZE_BITS 40
#define SIZE_MASK ((UINT64_C(1) << SIZE_BITS) - 1)
#define INITIAL_BITS 16

typedef struct {
    uintptr_t key; /* 0 = empty slot */
    uint64_t val;  /* size in the low 40 bits, window tag above */
} entry;

static entry *g_tab;
static size_t g_mask;    /* capacity - 1; capacity is a power of two */
static unsigned g_shift; /* 64 - log2(capacity) */
static size_t g_len;
static int g_untracked;
static int g_py_installed;

static const PyMemAllocatorDomain DOMAINS[2] = {PYMEM_DOMAIN_MEM, PYMEM_DOMAIN_OBJ};
#define MAX_SLOTS 8 /* installs whose hooks may be left behind, per process */
static PyMemAllocatorEx g_slots[MAX_SLOTS][2];
static int g_slot; /* slot of the current (or next) install */
static PyMemAllocatorEx *g_inner = g_slots[0];

/* The hooks count only through the current install's contexts; a detached
 * copy still called by a hook above it passes through. */
static inline int live(const PyMemAllocatorEx *in)
{
    return g_py_installed && (in == &g_inner[0] || in == &g_inner[1]);
}

static inline size_t home(uintptr_t key)
{
    return (size_t)(((uint64_t)key * UINT64_C(0x9E3779B97F4A7C15)) >> g_shift);
}

static int table_alloc(unsigned bits)
{
    entry *tab = calloc((size_t)1 << bits, sizeof(entry));
    if (tab == NULL) {
        return -1;
    }
    entry *old = g_tab;
    size_t old_cap = old ? g_mask + 1 : 0;
    g_tab = tab;
    g_mask = ((size_t)1 << bits) - 1;
    g_shift = 64 - bits;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].key != 0) {
            size_t j = home(old[i].key);
            while (g_tab[j].key != 0) {
                j = (j + 1) & g_mask;
            }
            g_tab[j] = old[i];
        }
    }
    free(old);
    return 0;
}

/* Room for one more entry at load <= 3/4; 0 when the table cannot grow. */
static inline int table_room(void)
{
    if ((g_len + 1) * 4 <= (g_mask + 1) * 3) {
        return 1;
    }
    unsigned bits = 64 - g_shift + 1;
    if (bits >= 48 || table_alloc(bits) < 0) {
        g_untracked = 1;
        return 0;
    }
    return 1;
}

static inline void table_put(uintptr_t key, uint64_t size, uint32_t tag)
{
    size_t j = home(key);
    while (g_tab[j].key != 0) {
        j = (j + 1) & g_mask;
    }
    g_tab[j].key = key;
    g_tab[j].val = (size & SIZE_MASK) | ((uint64_t)tag << SIZE_BITS);
    g_len++;
}

/* Remove key; 1 and its value when present.  Backward-shift deletion keeps
 * probe chains intact without tombstones. */
static inline int table_take(uintptr_t key, uint64_t *val)
{
    size_t i = home(key);
    while (g_tab[i].key != key) {
        if (g_tab[i].key == 0) {
            return 0;
        }
        i = (i + 1) & g_mask;
    }
    *val = g_tab[i].val;
    g_len--;
    size_t j = i;
    for (;;) {
        j = (j + 1) & g_mask;
        if (g_tab[j].key == 0) {
            break;
        }
        size_t k = home(g_tab[j].key);
        /* Entry j may move into the hole at i unless its home lies in (i, j]. */
        int stays = (i <= j) ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            g_tab[i] = g_tab[j];
            i = j;
        }
    }
    g_tab[i].key = 0;
    return 1;
}

static inline void track(void *p, size_t n)
{
    if (table_room()) {
        uint32_t tag = opprof_mem_count_alloc((int64_t)n);
        table_put((uintptr_t)p, n, tag);
    }
}

static void *pm_malloc(void *ctx, size_t n)
{
    PyMemAllocatorEx *in = ctx;
    void *p = in->malloc(in->ctx, n);
    if (p != NULL && live(in)) {
        track(p, n);
    }
    return p;
}

static void *pm_calloc(void *ctx, size_t nelem, size_t elsize)
{
    PyMemAllocatorEx *in = ctx;
    void *p = in->calloc(in->ctx, nelem, elsize);
    if (p != NULL && live(in)) {
        track(p, nelem * elsize);
    }
    return p;
}

static void *pm_realloc(void *ctx, void *ptr, size_t n)
{
    PyMemAllocatorEx *in = ctx;
    if (!live(in)) {
        return in->realloc(in->ctx, ptr, n);
    }
    uint64_t old = 0;
    int known = ptr != NULL && table_take((uintptr_t)ptr, &old);
    void *p = in->realloc(in->ctx, ptr, n);
    if (p == NULL) {
        if (known) {
            /* Failed: the old block is still there, and so is its slot. */
            table_put((uintptr_t)ptr, old & SIZE_MASK, (uint32_t)(old >> SIZE_BITS));
        }
        return NULL;
    }
    if (known) {
        uint32_t tag = opprof_mem_count_realloc((int64_t)(old & SIZE_MASK), (int64_t)n,
                                                (uint32_t)(old >> SIZE_BITS));
        table_put((uintptr_t)p, n, tag);
    } else {
        track(p, n);
    }
    return p;
}

static void pm_free(void *ctx, void *ptr)
{
    PyMemAllocatorEx *in = ctx;
    uint64_t v;
    if (ptr != NULL && live(in) && table_take((uintptr_t)ptr, &v)) {
        opprof_mem_count_free((int64_t)(v & SIZE_MASK), (uint32_t)(v >> SIZE_BITS));
    }
    in->free(in->ctx, ptr);
}

int opprof_mem_python_install_count(void) { return g_py_installed; }

int opprof_mem_python_untracked(void) { return g_untracked; }

int opprof_memory_python_install(void)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    int rc = OPPROF_OK;
    if (g_py_installed == 0) {
        if (g_slot == MAX_SLOTS) {
            rc = opprof_fail(OPPROF_E_HOOK,
                             "the Python allocator hooks were left behind %d times (another "
                             "hook went on top of them); not installing them again",
                             MAX_SLOTS);
        } else if (g_tab == NULL && table_alloc(INITIAL_BITS) < 0) {
            rc = opprof_fail(OPPROF_E_NOMEM, "no memory for the Python allocation table");
        } else {
            g_untracked = 0;
            for (int d = 0; d < 2; d++) {
                PyMem_GetAllocator(DOMAINS[d], &g_inner[d]);
                PyMemAllocatorEx ours = {&g_inner[d], pm_malloc, pm_calloc, pm_realloc, pm_free};
                PyMem_SetAllocator(DOMAINS[d], &ours);
            }
        }
    }
    if (rc == OPPROF_OK) {
        g_py_installed++;
    }
    PyGILState_Release(gs);
    return rc;
}

int opprof_memory_python_uninstall(void)
{
    PyGILState_STATE gs = PyGILState_Ensure();
    int rc = OPPROF_OK;
    if (g_py_installed == 0) {
        rc = opprof_fail(OPPROF_E_STATE, "the Python allocator hooks are not installed");
    } else if (g_py_installed == 1) {
        for (int d = 0; d < 2 && rc == OPPROF_OK; d++) {
            PyMemAllocatorEx cur;
            PyMem_GetAllocator(DOMAINS[d], &cur);
            if (cur.malloc != pm_malloc || cur.ctx != &g_inner[d]) {
                rc = opprof_fail(OPPROF_E_HOOK,
                                 "the Python allocator was changed after opprof hooked it; "
                                 "opprof's hooks stay where they are, counting nothing");
            }
        }
        if (rc == OPPROF_OK) {
            for (int d = 0; d < 2; d++) {
                PyMem_SetAllocator(DOMAINS[d], &g_inner[d]);
            }
        } else {
            /* Detach (see the top of the file): this slot may still be called. */
            g_inner = g_slots[++g_slot < MAX_SLOTS ? g_slot : MAX_SLOTS - 1];
        }
        /* Blocks still in the table will be freed unseen, so those allocated
         * in the window stay in held_bytes for good (the caller collects
         * garbage before uninstalling). */
        free(g_tab);
        g_tab = NULL;
        g_len = 0;
        g_py_installed = 0;
    } else {
        g_py_installed--;
    }
    PyGILState_Release(gs);
    return rc;
}
