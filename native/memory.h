/* pytest-opprof memory accounting (native/memory.c): the cffi cdef part.
 *
 * A NEP 49 numpy data-memory handler that wraps the handler numpy would
 * otherwise use, keeps a 16-byte size header in front of every block it hands
 * out, and counts bytes in process-wide relaxed atomics.  Optionally the same
 * counting for Python's PYMEM_DOMAIN_MEM and PYMEM_DOMAIN_OBJ allocators
 * (headerless: a pointer -> size table, so the hooks can be removed again).
 *
 * Counting model.  live_bytes is always kept (every block our handler gave
 * out is subtracted when it is freed, whenever that is).  The per-profile
 * figures (peak, allocated, allocations, freed, held) move only while a
 * session records with OPPROF_OPT_PROFILE_MEMORY, so allocations made by the
 * drain after stop never count.  opprof_memory_reset starts a new window: a
 * block allocated in the window is tagged with it, and held_bytes is the
 * bytes of tagged blocks not yet freed (the test's leak, read after
 * gc.collect()).  Same syntax rules as opprof.h: this file is cdef text.
 */

typedef struct opprof_memory_stats {
    int64_t live_bytes;        /* bytes now held in blocks our handlers gave out */
    int64_t start_live_bytes;  /* live_bytes at the last opprof_memory_reset */
    int64_t peak_bytes;        /* highest live_bytes while recording, minus start; >= 0 */
    int64_t allocated_bytes;   /* bytes allocated while recording (a realloc counts its new size) */
    int64_t allocations;       /* allocations while recording (malloc, calloc, realloc) */
    int64_t freed_bytes;       /* bytes freed while recording (a realloc counts its old size) */
    int64_t held_bytes;        /* bytes allocated while recording since the reset, still held */
    int64_t samples;           /* live-byte samples taken since the reset */
    int64_t samples_dropped;   /* samples beyond the capacity, not kept */
    int32_t installed;         /* install count of the numpy handler (0 = not installed) */
    int32_t threads_covered;   /* 1: new threads and contexts use the handler too */
    int32_t python_installed;  /* install count of the Python allocator hooks */
    int32_t python_untracked;  /* 1: the pointer table could not grow; some blocks not counted */
} opprof_memory_stats;

/* One point of the live-bytes counter track: taken at every allocation or
 * free of at least opprof_memory_sample_min_bytes() bytes while recording.
 * live_bytes is absolute: subtract start_live_bytes for "above start". */
typedef struct opprof_memory_sample {
    int64_t time_ns;           /* core clock (opprof_now_ns), same base as event times */
    int64_t live_bytes;
} opprof_memory_sample;

/* numpy data-memory handler.  Refcounted: the first install wraps the
 * handler in effect and makes ours the default of numpy's handler context
 * variable (new threads and contexts see it); the last uninstall restores
 * both.  Takes the GIL itself.  Blocks allocated under the handler stay
 * freeable after uninstall: the handler is never freed. */
int opprof_memory_install(void);
int opprof_memory_uninstall(void);

/* Python object allocators (PYMEM_DOMAIN_MEM and _OBJ), refcounted like the
 * numpy handler.  Takes the GIL itself.  Uninstall fails with OPPROF_E_HOOK
 * when someone else replaced the allocator after us (then it stays ours). */
int opprof_memory_python_install(void);
int opprof_memory_python_uninstall(void);

/* Start a measurement window: per-profile counters to zero, peak to the
 * current live bytes, held bytes to zero, samples cleared.  Call before
 * opprof_start; fails with OPPROF_E_STATE while recording. */
int opprof_memory_reset(void);
int opprof_memory_stats_get(opprof_memory_stats *out);

/* Live-bytes samples of the current window, in the order taken (sort by
 * time: threads interleave).  Call after stop. */
int opprof_memory_set_sample_capacity(int64_t max_samples);
int64_t opprof_memory_sample_min_bytes(void);
int opprof_memory_samples(opprof_memory_sample *out, int64_t capacity, int64_t *written);
