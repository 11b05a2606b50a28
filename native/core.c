/* pytest-opprof native core: clock, per-thread event buffers and arenas,
 * scopes, sessions.
 *
 * Hot path (opprof_op_begin/opprof_op_end) touches only the calling thread's
 * state: no locks, no syscalls, no Python API.  Everything that needs a lock
 * or the GIL (start, drain, interning text) runs on the control path.
 *
 * Depends on base.c (error text, recording words), strtab.c (the "[memory]"
 * name; the shape and stack tables a new session clears) and cuda.c (device
 * timing behind OPPROF_OPT_CUDA); nothing here calls the drain (drain.c),
 * which reads the thread states through core_internal.h.
 */
#include <Python.h>
#if PY_VERSION_HEX < 0x030B0000
#include <frameobject.h> /* 3.10: PyFrame_GetBack is not in Python.h */
#endif

#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "hotpath.h"
#include "strtab.h"
#ifdef OPPROF_HAVE_TSC
#include <cpuid.h>
#endif

#define OPPROF_HUGE_PAGE (2u << 20)

core_globals core_g = {
    .ctl = PTHREAD_MUTEX_INITIALIZER,
    .registry = PTHREAD_MUTEX_INITIALIZER,
    .generation = 1,
    .capacity = OPPROF_DEFAULT_CAPACITY,
    .ns_per_tick = 1.0,
};

/* Initial-exec: the module already uses static TLS (memory_count.c), and
 * this is read by every per-op path (opprof_hot_thread). */
__thread opprof_thread *opprof_tls_state __attribute__((tls_model("initial-exec")));
static pthread_key_t thread_key;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_status = OPPROF_OK;
static uint32_t memory_name_id;

/* ---- clock ------------------------------------------------------------- */

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline uint64_t ticks(void) { return opprof_hot_ticks(); }

uint64_t opprof_ticks(void) { return ticks(); }

#ifdef OPPROF_HAVE_TSC
static int cpu_has_invariant_tsc(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(0x80000000u, &a, &b, &c, &d) || a < 0x80000007u)
        return 0;
    __get_cpuid(0x80000007u, &a, &b, &c, &d);
    return (d >> 8) & 1;
}

/* One (tsc, ns) pair read as close together as the machine allows: the
 * tightest of a few tries, tsc taken at the midpoint of the clock read. */
static void clock_pair(uint64_t *tsc, int64_t *ns)
{
    uint64_t best = UINT64_MAX;
    for (int i = 0; i < 8; i++) {
        uint64_t a = __rdtsc();
        int64_t n = mono_ns();
        uint64_t b = __rdtsc();
        if (b - a < best) {
            best = b - a;
            *tsc = a + (b - a) / 2;
            *ns = n;
        }
    }
}

/* Ticks-to-ns from two pairs; 10 ms apart is enough for parts per 10^5. */
static int calibrate_tsc(void)
{
    uint64_t t0, t1;
    int64_t n0, n1;
    clock_pair(&t0, &n0);
    while (mono_ns() - n0 < 10000000LL)
        ;
    clock_pair(&t1, &n1);
    if (t1 <= t0)
        return 0;
    core_g.ns_per_tick = (double)(n1 - n0) / (double)(t1 - t0);
    core_g.base_ticks = t0;
    core_g.base_ns = n0;
    return core_g.ns_per_tick > 0.01 && core_g.ns_per_tick < 100.0;
}

/* Refines the rate over the whole time since init: a longer baseline gives
 * a better rate, and the rate only matters at drain. */
static void recalibrate_tsc(void)
{
    uint64_t t;
    int64_t n;
    clock_pair(&t, &n);
    if (n - core_g.base_ns > 1000000000LL && t > core_g.base_ticks)
        core_g.ns_per_tick = (double)(n - core_g.base_ns) / (double)(t - core_g.base_ticks);
}
#endif

int64_t core_ticks_to_ns(uint64_t t) { return core_clock_ns(core_clock_now(), t); }

const char *opprof_clock_source(void) { return core_g.use_tsc ? "tsc" : "clock_gettime"; }
double opprof_ns_per_tick(void) { return core_g.ns_per_tick; }
int64_t opprof_now_ns(void) { return core_ticks_to_ns(ticks()); }

/* ---- thread registry --------------------------------------------------- */

static void thread_exit(void *p)
{
    opprof_thread *t = p;
    pthread_mutex_lock(&core_g.registry);
    t->alive = 0;
    pthread_mutex_unlock(&core_g.registry);
    opprof_tls_state = NULL;
}

static void init_once_fn(void)
{
    const char *force = getenv("OPPROF_CLOCK");
    core_g.use_tsc = 0;
    core_g.ns_per_tick = 1.0;
#ifdef OPPROF_HAVE_TSC
    if (!(force && strcmp(force, "clock_gettime") == 0) && cpu_has_invariant_tsc())
        core_g.use_tsc = calibrate_tsc();
    if (!core_g.use_tsc)
        core_g.ns_per_tick = 1.0;
#endif
    if (pthread_key_create(&thread_key, thread_exit) != 0) {
        init_status = opprof_fail(OPPROF_E_NOMEM, "opprof_init: pthread_key_create failed");
        return;
    }
    init_status = opprof_name_intern("[memory]", &memory_name_id);
}

int opprof_init(void)
{
    pthread_once(&init_once, init_once_fn);
    if (init_status != OPPROF_OK)
        return opprof_fail(init_status, "opprof_init failed (clock or thread-key setup)");
    return OPPROF_OK;
}

static opprof_thread *thread_create(void)
{
    opprof_thread *t;
    pthread_mutex_lock(&core_g.registry);
    t = core_g.free_list;
    if (t) {
        core_g.free_list = t->next;
    } else {
        t = calloc(1, sizeof *t);
        if (t)
            t->slot = core_g.next_slot++;
    }
    if (t) {
        uint32_t slot = t->slot;
        memset(t, 0, sizeof *t);
        t->slot = slot;
        t->alive = 1;
        t->innermost = -1;
        t->tid = (uint64_t)syscall(SYS_gettid);
        t->next = core_g.threads;
        core_g.threads = t;
    }
    pthread_mutex_unlock(&core_g.registry);
    if (t) {
        core_switches_open(t); /* the counter of the thread that calls this */
        opprof_tls_state = t;
        pthread_setspecific(thread_key, t);
    }
    return t;
}

static void arena_trim(core_arena *a, int32_t keep)
{
    for (int32_t i = keep; i < a->nchunks; i++) {
        free(a->chunks[i]);
        a->chunks[i] = NULL;
    }
    if (a->nchunks > keep)
        a->nchunks = keep;
    a->cur = 0;
    a->off = 0;
}

/* The owner starts a new session lazily: events still open from the old one
 * stay on the stack (their ends must balance) but will not be committed. */
__attribute__((noinline)) void core_thread_reset(opprof_thread *t, uint32_t gen)
{
    int32_t open = t->depth < OPPROF_MAX_DEPTH ? t->depth : OPPROF_MAX_DEPTH;
    for (int32_t i = 0; i < open; i++)
        t->open[i].active = 0;
    t->innermost = -1;
    t->active_depth = 0;
    t->muted = opprof_thread_muted(t->tid);
    t->seq = 0;
    t->room = 0;
    t->reserved_left = 0;
    /* Keep warm the chunks the last session wrote (the next one is likely to
     * write as many) within OPPROF_KEEP_BYTES; give the rest back. */
    const core_chunk *last_used = t->cur;
    int used = last_used != NULL;
    int64_t kept_bytes = 0;
    core_chunk **link = &t->head;
    for (int i = 0; *link; i++) {
        core_chunk *c = *link;
        int64_t bytes = core_chunk_bytes(c);
        int keep = used ? core_chunk_kept(i, kept_bytes, bytes) : i < OPPROF_KEEP_CHUNKS;
        if (c == last_used)
            used = 0;
        if (keep) {
            kept_bytes += bytes;
            link = &c->next;
        } else {
            *link = c->next;
            core_chunk_free(c);
        }
    }
    t->wptr = NULL;
    t->cur = NULL;
    t->cur_used = 0;
    arena_trim(&t->shapes, OPPROF_KEEP_ARENA_CHUNKS);
    t->shape_owner = -1;
    t->last_shape = 0;
    t->loose_used = 0;
    atomic_store_explicit(&t->count, 0, memory_order_relaxed);
    atomic_store_explicit(&t->dropped, 0, memory_order_relaxed);
    atomic_store_explicit(&t->generation, gen, memory_order_release);
}

__attribute__((noinline)) opprof_thread *core_thread_first(void)
{
    opprof_thread *t = thread_create();
    if (t)
        core_thread_reset(t, atomic_load_explicit(&core_g.generation, memory_order_acquire));
    return t;
}

opprof_thread *opprof_thread_get(void) { return opprof_hot_thread(); }

/* Frees a dead thread's buffers and parks its state (and slot) for reuse.
 * Called with the registry lock and the GIL held. */
static void thread_retire(opprof_thread *t)
{
    core_release_stacks(t);
    core_switches_close(t);
    arena_trim(&t->stacks, 0);
    arena_trim(&t->shapes, 0);
    while (t->head) {
        core_chunk *c = t->head;
        t->head = c->next;
        core_chunk_free(c);
    }
    t->next = core_g.free_list;
    core_g.free_list = t;
}

/* ---- event buffers ----------------------------------------------------- */

/* Claims up to want records from the session's budget (lock-free). */
static int64_t budget_reserve(int64_t want)
{
    int64_t left = atomic_load_explicit(&core_g.budget, memory_order_relaxed);
    while (left > 0) {
        int64_t take = left < want ? left : want;
        if (atomic_compare_exchange_weak_explicit(&core_g.budget, &left, left - take,
                                                  memory_order_relaxed, memory_order_relaxed))
            return take;
    }
    return 0;
}

/* A large chunk's mapping: its bytes rounded up to whole pages. */
static size_t chunk_mapped_bytes(const core_chunk *c)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return ((size_t)core_chunk_bytes(c) + page - 1) & ~(page - 1);
}

/* A mapping of size bytes aligned to a huge page (NULL when out of memory). */
static void *map_aligned(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (size + page - 1) & ~(page - 1);
    size_t span = len + OPPROF_HUGE_PAGE;
    char *p = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    uintptr_t huge = OPPROF_HUGE_PAGE;
    char *start = (char *)(((uintptr_t)p + huge - 1) & ~(huge - 1));
    if (start > p)
        munmap(p, (size_t)(start - p));
    size_t tail = (size_t)(p + span - (start + len));
    if (tail)
        munmap(start + len, tail);
    return start;
}

/* The first chunk is small: most threads record little, and a huge page
 * would cost each of them 2 MB of zeroing.  Later chunks are large and
 * written once per session: huge pages cut the first-touch page faults,
 * which otherwise cost more than the events.  They are mapped, not taken
 * from malloc: malloc keeps freed blocks under its mmap threshold (raised
 * to a chunk's size once one is freed) for itself, and a test of several
 * rounds then held the last round's chunks beside the next round's drain. */
static core_chunk *chunk_alloc(int first)
{
    int64_t cap = first ? OPPROF_FIRST_CHUNK_RECORDS : OPPROF_CHUNK_RECORDS;
    size_t size = sizeof(core_chunk) + (size_t)cap * sizeof(opprof_event);
    void *p = first ? malloc(size) : map_aligned(size);
#ifdef MADV_HUGEPAGE
    if (p && !first)
        madvise(p, size & ~(size_t)(OPPROF_HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
    if (p) {
        ((core_chunk *)p)->next = NULL;
        ((core_chunk *)p)->cap = cap;
    }
    return p;
}

void core_chunk_free(core_chunk *c)
{
    if (c->cap > OPPROF_FIRST_CHUNK_RECORDS)
        munmap(c, chunk_mapped_bytes(c));
    else
        free(c);
}

/* Makes room for at least one record; 0 when the budget or memory ran out. */
__attribute__((noinline)) int core_refill(opprof_thread *t)
{
    if (t->reserved_left == 0) {
        t->reserved_left = budget_reserve(core_g.reserve_block);
        if (t->reserved_left == 0)
            return 0;
    }
    if (t->cur == NULL || t->cur_used == t->cur->cap) {
        core_chunk **next = t->cur ? &t->cur->next : &t->head;
        if (*next == NULL) {
            *next = chunk_alloc(next == &t->head);
            if (*next == NULL)
                return 0;
        }
        t->cur = *next;
        t->cur_used = 0;
    }
    int64_t room = t->cur->cap - t->cur_used;
    if (room > t->reserved_left)
        room = t->reserved_left;
    t->reserved_left -= room;
    t->wptr = &t->cur->rec[t->cur_used];
    t->cur_used += room;
    t->room = room;
    return 1;
}

/* ---- hot path ---------------------------------------------------------- */

int opprof_op_begin(opprof_thread *t, uint32_t name_id, uint16_t kind)
{
    uint32_t active = opprof_hot_active();
    if (active & OPPROF_ACTIVE_RECORDING)
        opprof_hot_sync(t);
    return opprof_hot_begin(t, active, name_id, kind);
}

void opprof_op_end(opprof_thread *t, uint16_t flags) { opprof_hot_end(t, flags); }

/* The innermost open event that records, or NULL. */
static inline core_open *open_top(opprof_thread *t)
{
    int32_t d = t->depth - 1;
    if (d < 0 || d >= OPPROF_MAX_DEPTH || !t->open[d].active)
        return NULL;
    return &t->open[d];
}

/* ---- arenas (shapes, stacks) ------------------------------------------- */

/* Drops the code-object references in t's stack arena and empties it.  GIL
 * held. */
void core_release_stacks(opprof_thread *t)
{
    core_arena *a = &t->stacks;
    for (int32_t c = 0; c < a->nchunks && c <= a->cur; c++) {
        int64_t limit = c == a->cur ? a->off : OPPROF_ARENA_WORDS;
        int64_t off = 0;
        while (off < limit) {
            int64_t *w = &a->chunks[c][off];
            if (w[0] == 0)
                break; /* end-of-chunk mark */
            for (int64_t i = 0; i < w[0]; i++)
                Py_DECREF((PyObject *)(intptr_t)w[1 + 2 * i]);
            off += 1 + 2 * w[0];
        }
    }
    a->cur = 0;
    a->off = 0;
}

/* Position of `words` contiguous free words (an entry never spans chunks),
 * or -1 when the arena is full or memory ran out. */
int64_t core_arena_reserve(core_arena *a, int64_t words)
{
    if (a->nchunks == 0 || a->off + words > OPPROF_ARENA_WORDS) {
        int32_t next = a->nchunks == 0 ? 0 : a->cur + 1;
        if (next >= OPPROF_ARENA_MAX_CHUNKS)
            return -1;
        if (a->nchunks > 0 && a->off < OPPROF_ARENA_WORDS)
            a->chunks[a->cur][a->off] = 0; /* end-of-chunk mark for walkers */
        if (next >= a->nchunks) {
            a->chunks[next] = malloc(OPPROF_ARENA_WORDS * sizeof(int64_t));
            if (!a->chunks[next])
                return -1;
            a->nchunks = next + 1;
        }
        a->cur = next;
        a->off = 0;
    }
    return (int64_t)a->cur * OPPROF_ARENA_WORDS + a->off;
}

void opprof_op_shape_arg(opprof_thread *t, int ndim, const int64_t *dims, int type_num)
{
    core_open *o = open_top(t);
    if (!o)
        return;
    core_arena *a = &t->shapes;
    if (o->ev.shape == 0) {
        /* header word (argument count) + per argument one (ndim, type) word and dims */
        int64_t pos =
            core_arena_reserve(a, 1 + OPPROF_MAX_SHAPE_ARGS * (1 + OPPROF_MAX_SHAPE_DIMS));
        if (pos < 0) {
            o->ev.flags |= OPPROF_FLAG_TRUNCATED;
            return;
        }
        a->chunks[a->cur][a->off++] = 0;
        o->ev.shape = (uint32_t)(pos + 1);
        t->shape_owner = o->ev.id;
    } else if (t->shape_owner != o->ev.id) {
        /* Another event wrote shapes since: this one's entry cannot grow. */
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
        return;
    }
    int64_t *hdr = core_arena_at(a, o->ev.shape - 1);
    if (*hdr >= OPPROF_MAX_SHAPE_ARGS) {
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
        return;
    }
    int n = ndim < 0 ? -1 : ndim;
    if (n > OPPROF_MAX_SHAPE_DIMS) {
        n = OPPROF_MAX_SHAPE_DIMS;
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
    }
    int64_t *w = &a->chunks[a->cur][a->off];
    w[0] = opprof_shape_word(n, type_num);
    for (int i = 0; i < n; i++)
        w[1 + i] = dims[i];
    a->off += 1 + (n > 0 ? n : 0);
    (*hdr)++;
}

void opprof_op_shapes(opprof_thread *t, const int64_t *entry, int32_t words, uint16_t flags)
{
    core_open *o = open_top(t);
    if (!o)
        return;
    o->ev.flags |= flags;
    if (o->ev.shape != 0) {
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
        return;
    }
    core_arena *a = &t->shapes;
    if (t->last_shape != 0 && t->last_shape_words == words &&
        memcmp(core_arena_at(a, (int64_t)t->last_shape - 1), entry,
               (size_t)words * sizeof *entry) == 0) {
        o->ev.shape = t->last_shape;
        return;
    }
    int64_t pos = core_arena_reserve(a, words);
    if (pos < 0) {
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
        return;
    }
    memcpy(&a->chunks[a->cur][a->off], entry, (size_t)words * sizeof *entry);
    a->off += words;
    o->ev.shape = (uint32_t)(pos + 1);
    t->last_shape = o->ev.shape;
    t->last_shape_words = words;
    /* Complete: opprof_op_shape_arg must not grow an entry others may share. */
    t->shape_owner = -1;
}

void opprof_op_capture_stack(opprof_thread *t)
{
    core_open *o = open_top(t);
    if (!o || o->ev.stack != 0)
        return;
    PyObject *codes[OPPROF_MAX_STACK];
    int64_t lines[OPPROF_MAX_STACK];
    int n = 0;
    PyFrameObject *f = PyEval_GetFrame();
    Py_XINCREF(f);
    while (f && n < OPPROF_MAX_STACK) {
        codes[n] = (PyObject *)PyFrame_GetCode(f);
        lines[n] = PyFrame_GetLineNumber(f);
        n++;
        PyFrameObject *back = PyFrame_GetBack(f);
        Py_DECREF(f);
        f = back;
    }
    if (f) {
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
        Py_DECREF(f);
    }
    if (n == 0)
        return;
    core_arena *a = &t->stacks;
    int64_t pos = core_arena_reserve(a, 1 + 2 * n);
    if (pos < 0) {
        for (int i = 0; i < n; i++)
            Py_DECREF(codes[i]);
        o->ev.flags |= OPPROF_FLAG_TRUNCATED;
        return;
    }
    int64_t *w = &a->chunks[a->cur][a->off];
    w[0] = n;
    for (int i = 0; i < n; i++) {
        w[1 + 2 * i] = (int64_t)(intptr_t)codes[i]; /* the arena owns this reference */
        w[2 + 2 * i] = lines[i];
    }
    a->off += 1 + 2 * n;
    o->ev.stack = (uint32_t)(pos + 1);
}

void opprof_mem_record(opprof_thread *t, int64_t alloc_bytes, int64_t freed_bytes)
{
    uint32_t active = opprof_hot_active();
    if (!t || !active || t->muted)
        return;
    if (t->innermost >= 0) {
        opprof_event *ev = &t->open[t->innermost].ev;
        ev->self_alloc_bytes += alloc_bytes;
        ev->self_free_bytes += freed_bytes;
        ev->self_alloc_count += alloc_bytes > 0;
        return;
    }
    if (!(active & OPPROF_OPT_PROFILE_MEMORY))
        return;
    opprof_hot_sync(t);
    if (!(active & OPPROF_OPT_MEMORY_EVENTS)) {
        /* One record per thread: an event per allocation cost a commit here
         * and about 40 ns more per event in the drain and the model. */
        opprof_event *loose = &t->loose;
        if (!t->loose_used) {
            loose->start_ns = loose->end_ns = (int64_t)ticks();
            opprof_hot_event_init(t, loose, memory_name_id, OPPROF_KIND_MEMORY, -1, 0);
            t->loose_used = 1;
        }
        loose->self_alloc_bytes += alloc_bytes;
        loose->self_free_bytes += freed_bytes;
        loose->self_alloc_count += alloc_bytes > 0;
        return;
    }
    opprof_event ev;
    ev.start_ns = ev.end_ns = (int64_t)ticks();
    opprof_hot_event_init(t, &ev, memory_name_id, OPPROF_KIND_MEMORY, -1, 0);
    ev.self_alloc_bytes = alloc_bytes;
    ev.self_free_bytes = freed_bytes;
    ev.self_alloc_count = alloc_bytes > 0;
    opprof_hot_commit(t, &ev);
}

/* ---- record_function scopes -------------------------------------------- */

void core_pop_holes(opprof_thread *t)
{
    while (t->holes > 0 && t->depth > 0 && t->depth <= OPPROF_MAX_DEPTH &&
           t->open[t->depth - 1].hole) {
        core_open *o = &t->open[--t->depth];
        if (o->active == 2)
            t->active_depth--;
        o->active = 0;
        o->hole = 0;
        t->holes--;
    }
}

void core_close_below_top(opprof_thread *t, int32_t d, uint16_t flags)
{
    uint32_t switches = *t->switches;
    uint64_t end = opprof_hot_ticks();
    core_open *o = &t->open[d];
    o->hole = 1;
    t->holes++;
    if (o->active != 1)
        return;
    o->active = 2;
    /* Out of the chain of innermost recording entries: the next one above
     * takes this one's place (and parent), or the thread's innermost does. */
    int32_t top = t->depth < OPPROF_MAX_DEPTH ? t->depth : OPPROF_MAX_DEPTH;
    if (t->innermost == d) {
        t->innermost = o->prev_innermost;
    } else {
        for (int32_t i = d + 1; i < top; i++) {
            core_open *above = &t->open[i];
            if (above->active == 1 && above->prev_innermost == d) {
                above->prev_innermost = o->prev_innermost;
                above->ev.parent = o->ev.parent;
                break;
            }
        }
    }
    o->ev.end_ns = (int64_t)end;
    o->ev.flags |= flags;
    opprof_hot_wait_end(t, o, switches);
    if (opprof_g_options & OPPROF_OPT_CUDA)
        opprof_cuda_op_end(o->ev.depth, o->ev.id);
    opprof_hot_commit(t, &o->ev);
}

int opprof_scope_push(uint32_t name_id)
{
    opprof_thread *t = opprof_hot_thread();
    if (!t)
        return opprof_fail(OPPROF_E_NOMEM, "opprof_scope_push: no memory for thread state");
    if (opprof_hot_scope_push(t, name_id)) {
        /* cffi released the GIL around this call; frames need it. */
        PyGILState_STATE g = PyGILState_Ensure();
        opprof_op_capture_stack(t);
        PyGILState_Release(g);
    }
    return OPPROF_OK;
}

int opprof_scope_pop(uint32_t flags)
{
    opprof_thread *t = opprof_tls_state;
    if (!t || t->depth <= 0)
        return opprof_fail(OPPROF_E_STATE, "opprof_scope_pop: no open scope on this thread");
    opprof_hot_end(t, (uint16_t)flags);
    return OPPROF_OK;
}

int32_t opprof_scope_depth(void)
{
    const opprof_thread *t = opprof_tls_state;
    return t ? t->depth : 0;
}

/* A test that left scopes open would push every later event past
 * OPPROF_MAX_DEPTH (not recorded): the plugin closes them after its round. */
int32_t opprof_scope_unwind(int32_t depth)
{
    opprof_thread *t = opprof_tls_state;
    int32_t closed = 0;
    if (depth < 0)
        depth = 0;
    while (t && t->depth > depth) {
        opprof_hot_end(t, OPPROF_FLAG_TRUNCATED);
        closed++;
    }
    return closed;
}

/* ---- sessions ---------------------------------------------------------- */

#define OPPROF_ALL_OPTS                                                             \
    (OPPROF_OPT_RECORD_SHAPES | OPPROF_OPT_PROFILE_MEMORY | OPPROF_OPT_WITH_STACK | \
     OPPROF_OPT_CAPTURE_NUMPY | OPPROF_OPT_CUDA | OPPROF_OPT_MEMORY_EVENTS |        \
     OPPROF_OPT_CAPTURE_SCIPY | OPPROF_OPT_CAPTURE_SKLEARN)

int opprof_start(uint32_t options)
{
    int rc = opprof_init();
    if (rc != OPPROF_OK)
        return rc;
    if (options & ~(uint32_t)OPPROF_ALL_OPTS)
        return opprof_fail(OPPROF_E_ARG, "opprof_start: unknown option bits 0x%x",
                           options & ~(uint32_t)OPPROF_ALL_OPTS);
    pthread_mutex_lock(&core_g.ctl);
    if (opprof_g_recording) {
        pthread_mutex_unlock(&core_g.ctl);
        return opprof_fail(OPPROF_E_STATE,
                           "opprof_start: a session is already recording; stop it first");
    }
    /* Code-object references held by stack arenas are dropped under the GIL;
     * the GIL also keeps owners from capturing stacks meanwhile. */
    PyGILState_STATE g = PyGILState_Ensure();
    pthread_mutex_lock(&core_g.registry);
    for (opprof_thread **link = &core_g.threads; *link;) {
        opprof_thread *t = *link;
        if (!t->alive) {
            *link = t->next;
            thread_retire(t);
            continue;
        }
        core_release_stacks(t);
        link = &t->next;
    }
    pthread_mutex_unlock(&core_g.registry);
    PyGILState_Release(g);
    opprof_strtab_lock();
    opprof_strtab_clear();
    opprof_strtab_unlock();
#ifdef OPPROF_HAVE_TSC
    if (core_g.use_tsc)
        recalibrate_tsc();
#endif
    atomic_store_explicit(&core_g.budget, core_g.capacity, memory_order_relaxed);
    /* Small blocks for small capacities: a thread cannot sit on a large share
     * of the budget that others need. */
    core_g.reserve_block = core_g.capacity / 64;
    if (core_g.reserve_block > OPPROF_RESERVE_BLOCK)
        core_g.reserve_block = OPPROF_RESERVE_BLOCK;
    if (core_g.reserve_block < 1)
        core_g.reserve_block = 1;
    atomic_fetch_add_explicit(&core_g.generation, 1, memory_order_release);
    opprof_g_options = options;
    __atomic_store_n(&opprof_g_recording, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&opprof_g_active, options | OPPROF_ACTIVE_RECORDING, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&core_g.ctl);
    return OPPROF_OK;
}

int opprof_stop(void)
{
    pthread_mutex_lock(&core_g.ctl);
    if (!opprof_g_recording) {
        pthread_mutex_unlock(&core_g.ctl);
        return opprof_fail(OPPROF_E_STATE, "opprof_stop: no session is recording");
    }
    __atomic_store_n(&opprof_g_active, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&opprof_g_recording, 0, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&core_g.ctl);
    return OPPROF_OK;
}

int opprof_set_capacity(int64_t max_events)
{
    if (max_events <= 0)
        return opprof_fail(OPPROF_E_ARG, "opprof_set_capacity: max_events must be > 0, got %lld",
                           (long long)max_events);
    pthread_mutex_lock(&core_g.ctl);
    core_g.capacity = max_events;
    pthread_mutex_unlock(&core_g.ctl);
    return OPPROF_OK;
}

/* ---- tree helper --------------------------------------------------------- */

int opprof_nest_sorted(const uint64_t *thread, const int64_t *start, const int64_t *end, int64_t n,
                       int64_t *parent)
{
    if (n < 0)
        return opprof_fail(OPPROF_E_ARG, "opprof_nest_sorted: n must be >= 0");
    for (int64_t i = 1; i < n; i++) {
        int sorted =
            thread[i - 1] < thread[i] ||
            (thread[i - 1] == thread[i] &&
             (start[i - 1] < start[i] || (start[i - 1] == start[i] && end[i - 1] >= end[i])));
        if (!sorted)
            return opprof_fail(OPPROF_E_ARG,
                               "opprof_nest_sorted: rows must be sorted by (thread, start asc, end "
                               "desc); row %lld is out of order",
                               (long long)i);
    }
    /* The stack holds candidate containers, outermost at the bottom; `parent`
     * doubles as the link to the next one down.  As in torch's event tree, an
     * event starting exactly at another's end is not inside it. */
    int64_t top = -1;
    for (int64_t i = 0; i < n; i++) {
        while (top >= 0 && (thread[top] != thread[i] || start[i] >= end[top] || end[i] > end[top]))
            top = parent[top];
        parent[i] = top;
        top = i;
    }
    return OPPROF_OK;
}
