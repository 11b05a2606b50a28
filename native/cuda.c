/* pytest-opprof CUDA event timing: see cuda.h for the model.
 *
 * The runtime is reached only through function pointers filled by dlsym, so
 * the extension neither links nor needs CUDA; a fake runtime with the same
 * entry points (tests/fake_cudart) exercises every path on a CPU machine.
 *
 * Hot path (opprof_cuda_op_begin/end, called by the core only while the
 * session has OPPROF_OPT_CUDA): one atomic add on the name's call counter;
 * for a sampled call one atomic add to claim a pair and one cudaEventRecord.
 * The pair index of each open event lives in a thread-local slot indexed by
 * the event's active depth, tagged with the session so a slot left over from
 * an older session is never read as current.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda.h"
#include "opprof_internal.h"

#define CUDA_NAME_SLOTS 65536 /* per-name call counters; larger ids are always timed */
#define CUDA_POOL_BLOCK 4096  /* pairs per pool block */
#define CUDA_POOL_BLOCKS 1024 /* so at most 4M pairs per session */
#define CUDA_EVENT_DEFAULT 0
#define CUDA_ERROR_NOT_READY 600

typedef int (*fn_int_ptr)(int *);
typedef int (*fn_event_create)(void **, unsigned int);
typedef int (*fn_event_record)(void *, void *);
typedef int (*fn_event)(void *);
typedef int (*fn_elapsed)(float *, void *, void *);
typedef int (*fn_mem_info)(size_t *, size_t *);
typedef const char *(*fn_error_string)(int);

static struct {
    void *handle;
    char path[1024];
    fn_int_ptr get_device_count;
    fn_event_create event_create;
    fn_event_record event_record;
    fn_event event_synchronize;
    fn_event event_destroy;
    fn_elapsed elapsed_time;
    fn_mem_info mem_get_info;
    fn_error_string error_string;
    int device_count;
} rt;

typedef struct cuda_pair {
    void *start;
    void *end;
    int64_t event_id; /* core event id, set at end; -1 while open */
    int64_t elapsed_ns;
    _Atomic int state; /* 0 claimed, 1 start recorded, 2 both recorded, 3 resolved, -1 failed */
} cuda_pair;

static pthread_mutex_t cuda_lock = PTHREAD_MUTEX_INITIALIZER;
static cuda_pair *pool[CUDA_POOL_BLOCKS];
static _Atomic int64_t pool_events; /* events created, kept across sessions */
static _Atomic int64_t pairs_used;  /* pairs claimed this session */
static int64_t max_pairs = (int64_t)CUDA_POOL_BLOCK * CUDA_POOL_BLOCKS;
static int64_t sample_rate = 1;
static _Atomic uint32_t *name_calls; /* CUDA_NAME_SLOTS counters */
static _Atomic int64_t calls_seen;
static _Atomic int64_t dropped;
static _Atomic int64_t last_end = -1; /* pair whose end event was recorded last */
static _Atomic int last_error;
static int64_t resolved;
static _Atomic uint32_t session = 1;

typedef struct {
    uint32_t session;
    int64_t pair; /* -1: this event is not timed */
} tls_slot;
/* Heap, not a TLS array: the static TLS block of a dlopen'ed extension is
 * small and shared with every other library. */
static __thread tls_slot *tls_open;
static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void tls_init(void) { pthread_key_create(&tls_key, free); }

static __attribute__((noinline)) tls_slot *tls_slots_create(void)
{
    pthread_once(&tls_once, tls_init);
    tls_open = calloc(OPPROF_MAX_DEPTH, sizeof *tls_open);
    if (tls_open)
        pthread_setspecific(tls_key, tls_open);
    return tls_open;
}

/* ---- loading ------------------------------------------------------------ */

static void *need(void *h, const char *sym, int *missing)
{
    void *p = dlsym(h, sym);
    if (!p)
        *missing = 1;
    return p;
}

int opprof_cuda_load(const char *path)
{
    if (!path || !*path)
        return opprof_fail(OPPROF_E_ARG, "opprof_cuda_load: empty path");
    pthread_mutex_lock(&cuda_lock);
    if (rt.handle) {
        int same = strcmp(rt.path, path) == 0;
        pthread_mutex_unlock(&cuda_lock);
        if (same)
            return OPPROF_OK;
        return opprof_fail(OPPROF_E_STATE, "opprof_cuda_load: %s is already loaded, not %s",
                           rt.path, path);
    }
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        pthread_mutex_unlock(&cuda_lock);
        return opprof_fail(OPPROF_E_UNSUPPORTED, "cannot open CUDA runtime %s: %s", path,
                           why ? why : "unknown dlopen error");
    }
    int missing = 0;
    rt.get_device_count = (fn_int_ptr)need(h, "cudaGetDeviceCount", &missing);
    rt.event_create = (fn_event_create)need(h, "cudaEventCreateWithFlags", &missing);
    rt.event_record = (fn_event_record)need(h, "cudaEventRecord", &missing);
    rt.event_synchronize = (fn_event)need(h, "cudaEventSynchronize", &missing);
    rt.event_destroy = (fn_event)need(h, "cudaEventDestroy", &missing);
    rt.elapsed_time = (fn_elapsed)need(h, "cudaEventElapsedTime", &missing);
    rt.mem_get_info = (fn_mem_info)need(h, "cudaMemGetInfo", &missing);
    rt.error_string = (fn_error_string)need(h, "cudaGetErrorString", &missing);
    if (missing) {
        dlclose(h);
        pthread_mutex_unlock(&cuda_lock);
        return opprof_fail(OPPROF_E_UNSUPPORTED,
                           "%s lacks CUDA runtime entry points (cudaEventRecord, ...)", path);
    }
    int count = 0;
    int err = rt.get_device_count(&count);
    if (err != 0 || count < 1) {
        /* The error string lives in the runtime's memory: copy it before dlclose unmaps it
           (a CUDA toolkit without a driver, common on CI images, took this path). */
        const char *text = err ? rt.error_string(err) : "no CUDA device";
        char why[256];
        snprintf(why, sizeof why, "%s", text ? text : "cudaGetDeviceCount failed");
        dlclose(h);
        pthread_mutex_unlock(&cuda_lock);
        return opprof_fail(OPPROF_E_UNSUPPORTED, "CUDA runtime %s: %s", path, why);
    }
    if (!name_calls) {
        name_calls = calloc(CUDA_NAME_SLOTS, sizeof *name_calls);
        if (!name_calls) {
            dlclose(h);
            pthread_mutex_unlock(&cuda_lock);
            return opprof_fail(OPPROF_E_NOMEM, "opprof_cuda_load: no memory for counters");
        }
    }
    rt.device_count = count;
    snprintf(rt.path, sizeof rt.path, "%s", path);
    rt.handle = h;
    pthread_mutex_unlock(&cuda_lock);
    return OPPROF_OK;
}

int opprof_cuda_loaded(void) { return rt.handle != NULL; }
const char *opprof_cuda_path(void) { return rt.handle ? rt.path : ""; }

/* ---- sessions ----------------------------------------------------------- */

int opprof_cuda_configure(int64_t rate, int64_t max)
{
    if (!rt.handle)
        return opprof_fail(OPPROF_E_STATE, "opprof_cuda_configure: no CUDA runtime loaded");
    if (rate < 1)
        return opprof_fail(OPPROF_E_ARG, "CUDA sample rate must be >= 1, got %lld",
                           (long long)rate);
    if (max < 1 || max > (int64_t)CUDA_POOL_BLOCK * CUDA_POOL_BLOCKS)
        return opprof_fail(OPPROF_E_ARG, "CUDA pairs per session must be in 1..%lld, got %lld",
                           (long long)CUDA_POOL_BLOCK * CUDA_POOL_BLOCKS, (long long)max);
    if (opprof_is_recording())
        return opprof_fail(OPPROF_E_STATE, "opprof_cuda_configure: a session is recording");
    pthread_mutex_lock(&cuda_lock);
    sample_rate = rate;
    max_pairs = max;
    memset((void *)name_calls, 0, CUDA_NAME_SLOTS * sizeof *name_calls);
    atomic_store(&pairs_used, 0);
    atomic_store(&calls_seen, 0);
    atomic_store(&dropped, 0);
    atomic_store(&last_end, -1);
    atomic_store(&last_error, 0);
    resolved = 0;
    atomic_fetch_add(&session, 1);
    pthread_mutex_unlock(&cuda_lock);
    return OPPROF_OK;
}

/* The pair at index i, its block allocated on first use (rare, lock held). */
static cuda_pair *pair_at(int64_t i)
{
    int64_t b = i / CUDA_POOL_BLOCK;
    cuda_pair *block = __atomic_load_n(&pool[b], __ATOMIC_ACQUIRE);
    if (__builtin_expect(block == NULL, 0)) {
        pthread_mutex_lock(&cuda_lock);
        block = pool[b];
        if (!block) {
            block = calloc(CUDA_POOL_BLOCK, sizeof *block);
            __atomic_store_n(&pool[b], block, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&cuda_lock);
        if (!block)
            return NULL;
    }
    return &block[i % CUDA_POOL_BLOCK];
}

static int ensure_events(cuda_pair *p)
{
    if (p->start == NULL) {
        int err = rt.event_create(&p->start, CUDA_EVENT_DEFAULT);
        if (err) {
            p->start = NULL;
            atomic_store(&last_error, err);
            return 0;
        }
        atomic_fetch_add(&pool_events, 1);
    }
    if (p->end == NULL) {
        int err = rt.event_create(&p->end, CUDA_EVENT_DEFAULT);
        if (err) {
            p->end = NULL;
            atomic_store(&last_error, err);
            return 0;
        }
        atomic_fetch_add(&pool_events, 1);
    }
    return 1;
}

void opprof_cuda_op_begin(uint32_t name_id, uint32_t depth)
{
    tls_slot *slots = tls_open ? tls_open : tls_slots_create();
    if (depth >= OPPROF_MAX_DEPTH || !slots) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        return;
    }
    tls_slot *s = &slots[depth];
    s->session = atomic_load_explicit(&session, memory_order_relaxed);
    s->pair = -1;
    atomic_fetch_add_explicit(&calls_seen, 1, memory_order_relaxed);
    if (name_id < CUDA_NAME_SLOTS) {
        uint32_t n = atomic_fetch_add_explicit(&name_calls[name_id], 1, memory_order_relaxed);
        if (n % (uint64_t)sample_rate != 0)
            return;
    }
    int64_t i = atomic_fetch_add_explicit(&pairs_used, 1, memory_order_relaxed);
    cuda_pair *p = i < max_pairs ? pair_at(i) : NULL;
    if (!p || !ensure_events(p)) {
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        if (p)
            atomic_store(&p->state, -1);
        return;
    }
    p->event_id = -1;
    p->elapsed_ns = -1;
    /* Stream 0 is the legacy default stream: it orders after all prior work. */
    int err = rt.event_record(p->start, NULL);
    if (err) {
        atomic_store(&last_error, err);
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        atomic_store(&p->state, -1);
        return;
    }
    atomic_store_explicit(&p->state, 1, memory_order_relaxed);
    s->pair = i;
}

void opprof_cuda_op_end(uint32_t depth, int64_t event_id)
{
    if (depth >= OPPROF_MAX_DEPTH || !tls_open)
        return;
    tls_slot *s = &tls_open[depth];
    if (s->pair < 0 || s->session != atomic_load_explicit(&session, memory_order_relaxed))
        return;
    int64_t s_pair = s->pair;
    cuda_pair *p = pair_at(s_pair);
    s->pair = -1;
    if (!p)
        return;
    int err = rt.event_record(p->end, NULL);
    if (err) {
        atomic_store(&last_error, err);
        atomic_fetch_add_explicit(&dropped, 1, memory_order_relaxed);
        atomic_store(&p->state, -1);
        return;
    }
    p->event_id = event_id;
    atomic_store_explicit(&p->state, 2, memory_order_release);
    atomic_store_explicit(&last_end, s_pair, memory_order_relaxed);
}

int opprof_cuda_resolve(void)
{
    if (!rt.handle)
        return opprof_fail(OPPROF_E_STATE, "opprof_cuda_resolve: no CUDA runtime loaded");
    if (opprof_is_recording())
        return opprof_fail(OPPROF_E_STATE, "opprof_cuda_resolve: stop the session first");
    pthread_mutex_lock(&cuda_lock);
    int64_t used = atomic_load(&pairs_used);
    if (used > max_pairs)
        used = max_pairs;
    /* The legacy default stream runs in record order: once the end event
     * recorded last has completed, so has every other one (a pair that is
     * still not ready after that is waited for on its own). */
    int64_t newest = atomic_load(&last_end);
    if (newest >= 0 && newest < used) {
        int err = rt.event_synchronize(pair_at(newest)->end);
        if (err)
            atomic_store(&last_error, err);
    }
    int64_t n = 0;
    for (int64_t i = 0; i < used; i++) {
        cuda_pair *p = pair_at(i);
        int state = atomic_load_explicit(&p->state, memory_order_acquire);
        n += state == 3; /* resolved by an earlier call: resolving is idempotent */
        if (state != 2)
            continue;
        float ms = 0.0f;
        int err = rt.elapsed_time(&ms, p->start, p->end);
        if (err == CUDA_ERROR_NOT_READY) {
            rt.event_synchronize(p->end);
            err = rt.elapsed_time(&ms, p->start, p->end);
        }
        if (err) {
            atomic_store(&last_error, err);
            atomic_store(&p->state, -1);
            continue;
        }
        p->elapsed_ns = (int64_t)((double)ms * 1e6 + 0.5);
        atomic_store(&p->state, 3);
        n++;
    }
    resolved = n;
    pthread_mutex_unlock(&cuda_lock);
    return OPPROF_OK;
}

int opprof_cuda_results(int64_t *event_ids, int64_t *elapsed_ns, int64_t capacity, int64_t *written)
{
    if (capacity < 0 || !written)
        return opprof_fail(OPPROF_E_ARG, "opprof_cuda_results: bad capacity or output");
    pthread_mutex_lock(&cuda_lock);
    int64_t used = atomic_load(&pairs_used);
    if (used > max_pairs)
        used = max_pairs;
    int64_t n = 0;
    for (int64_t i = 0; i < used && n < capacity; i++) {
        cuda_pair *p = pair_at(i);
        if (atomic_load(&p->state) != 3)
            continue;
        event_ids[n] = p->event_id;
        elapsed_ns[n] = p->elapsed_ns;
        n++;
    }
    pthread_mutex_unlock(&cuda_lock);
    *written = n;
    return OPPROF_OK;
}

int opprof_cuda_stats_get(opprof_cuda_stats *out)
{
    if (!out)
        return opprof_fail(OPPROF_E_ARG, "opprof_cuda_stats_get: NULL output");
    int64_t used = atomic_load(&pairs_used);
    int64_t drop = atomic_load(&dropped);
    out->calls = atomic_load(&calls_seen);
    out->timed = (used < max_pairs ? used : max_pairs) - drop;
    if (out->timed < 0)
        out->timed = 0;
    out->resolved = resolved;
    out->dropped = drop + (used > max_pairs ? used - max_pairs : 0);
    out->pool_events = atomic_load(&pool_events);
    out->sample_rate = sample_rate;
    out->last_error = atomic_load(&last_error);
    out->device_count = rt.device_count;
    return OPPROF_OK;
}

int opprof_cuda_mem_info(int64_t *free_bytes, int64_t *total_bytes)
{
    if (!rt.handle)
        return opprof_fail(OPPROF_E_STATE, "opprof_cuda_mem_info: no CUDA runtime loaded");
    size_t f = 0, t = 0;
    int err = rt.mem_get_info(&f, &t);
    if (err)
        return opprof_fail(OPPROF_E_UNSUPPORTED, "cudaMemGetInfo failed: %s", rt.error_string(err));
    *free_bytes = (int64_t)f;
    *total_bytes = (int64_t)t;
    return OPPROF_OK;
}

/* ---- fork (fork.c) ------------------------------------------------------ */

/* Held across dlopen and CUDA calls, so never taken across fork(): the
 * child re-initialises it (CUDA itself does not work in a forked child). */
void opprof_cuda_atfork(int phase)
{
    if (phase == OPPROF_FORK_CHILD)
        pthread_mutex_init(&cuda_lock, NULL);
}
