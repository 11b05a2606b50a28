/* pytest-opprof native core: the public C API.
 *
 * This header doubles as the cffi cdef (native/build_ffi.py reads it), so it
 * holds only declarations cffi can parse: no #include, no macros with bodies,
 * no inline functions.  Every entry point is prefixed opprof_, returns an int
 * status code (OPPROF_OK == 0) unless it is a pure query, and leaves a message
 * for opprof_last_error() when it fails.
 *
 * cffi releases the GIL around every call made from Python: an entry point
 * that touches Python objects takes the GIL itself (PyGILState_Ensure).
 */

/* ---- status codes ---------------------------------------------------- */
enum {
    OPPROF_OK = 0,
    OPPROF_E_STATE = 1,       /* wrong state: start while running, stop while idle */
    OPPROF_E_NOMEM = 2,       /* allocation failed */
    OPPROF_E_ARG = 3,         /* bad argument */
    OPPROF_E_UNSUPPORTED = 4, /* this numpy / Python / CPU cannot do it */
    OPPROF_E_PYTHON = 5,      /* a Python C-API call failed (message has details) */
    OPPROF_E_HOOK = 6         /* a hook could not be installed or restored */
};

/* ---- event kinds and flags ------------------------------------------- */
enum {
    OPPROF_KIND_SCOPE = 0, /* record_function scope */
    OPPROF_KIND_NUMPY = 1, /* numpy call captured natively */
    OPPROF_KIND_TORCH = 2, /* torch op (filled in from Python by the torch source) */
    OPPROF_KIND_MEMORY = 3 /* allocation/free outside any open op: the "[memory]" event */
};
enum {
    OPPROF_FLAG_EXCEPTION = 1, /* the op raised */
    OPPROF_FLAG_TRUNCATED = 2, /* shapes or stack were cut at their bound */
    OPPROF_FLAG_SWITCHED = 4   /* the thread left its CPU during the op (switches.c) */
};

/* ---- start options (bit set passed to opprof_start) ------------------ */
enum {
    OPPROF_OPT_RECORD_SHAPES = 1,
    OPPROF_OPT_PROFILE_MEMORY = 2,
    OPPROF_OPT_WITH_STACK = 4,
    OPPROF_OPT_CAPTURE_NUMPY = 8, /* numpy hooks record only with this bit set */
    OPPROF_OPT_CUDA = 16,         /* CUDA event pair per sampled op/scope (native/cuda.h) */
    /* With OPPROF_OPT_PROFILE_MEMORY: one "[memory]" event per allocation or
     * free outside any open event (what a trace shows as instants).  Without
     * it they are summed into one "[memory]" record per thread at the time of
     * the first: the same bytes, no event per allocation. */
    OPPROF_OPT_MEMORY_EVENTS = 32,
    OPPROF_OPT_CAPTURE_SCIPY = 64, /* scipy's f2py and Cython hooks record only with this bit */
    OPPROF_OPT_CAPTURE_SKLEARN =
        128 /* scikit-learn's Python functions (pyfunc_hooks.h), with this bit */
};

/* One finished event.  Fixed size; per-thread buffers hold these, and
 * opprof_drain copies them into one numpy structured array whose dtype is
 * pytest_opprof/records.py:EVENT_DTYPE (keep the two in step).
 * Times are nanoseconds on the core's monotonic clock after draining
 * (raw ticks while buffered). */
typedef struct opprof_event {
    int64_t start_ns;
    int64_t end_ns;
    int64_t id;     /* unique in a session: (thread slot << 40) | per-thread sequence */
    int64_t parent; /* id of the innermost event open on this thread at begin, -1 if none */
    int64_t self_alloc_bytes;  /* bytes allocated while this was the innermost open event */
    int64_t self_free_bytes;   /* bytes freed while this was the innermost open event */
    int64_t device_ns;         /* device time, -1 when not measured */
    uint64_t thread;           /* OS thread id (gettid on Linux) */
    uint32_t name;             /* interned name id (opprof_name_get) */
    uint16_t kind;             /* OPPROF_KIND_* */
    uint16_t flags;            /* OPPROF_FLAG_* */
    uint32_t shape;            /* interned input-shapes id, 0 = none (opprof_shape_get) */
    uint32_t stack;            /* interned stack id, 0 = none (opprof_stack_get) */
    uint32_t depth;            /* number of enclosing open events on this thread */
    uint32_t self_alloc_count; /* allocations while this was the innermost open event */
    int64_t wait_ns; /* ns the thread waited for a CPU during the event, -1 not measured */
} opprof_event;

/* ---- lifecycle -------------------------------------------------------- */
int opprof_init(void);                 /* idempotent: calibrates the clock */
const char *opprof_last_error(void);   /* message of the last failure on this thread */
const char *opprof_clock_source(void); /* "tsc" or "clock_gettime" */
double opprof_ns_per_tick(void);
int64_t opprof_now_ns(void); /* the core clock, in ns */
/* Whether threads can tell that they were switched out during an op
 * (OPPROF_FLAG_SWITCHED): 1 yes, 0 refused here, -1 no thread recorded yet. */
int opprof_switches_supported(void);

int opprof_start(uint32_t options); /* clears buffers, starts recording in all threads */
int opprof_stop(void);              /* stops recording; buffers kept for draining */
int opprof_is_recording(void);

/* Drain everything recorded since the last start.  Call after stop.
 * opprof_pending() gives the count to size the output array. */
int64_t opprof_pending(void);
int opprof_drain(opprof_event *out, int64_t capacity, int64_t *written, int64_t *dropped);
int opprof_set_capacity(
    int64_t max_events); /* per session; beyond it events are dropped and counted */

/* ---- interned strings -------------------------------------------------- */
int opprof_name_intern(const char *name, uint32_t *id);
const char *opprof_name_get(uint32_t id); /* NULL for an unknown id */
uint32_t opprof_name_count(void);
/* Forget every name with an id >= keep (ids below stay as they are): the
 * names of record_function scopes, once no undrained event can hold their
 * ids.  OPPROF_E_STATE while a session records. */
int opprof_name_trim(uint32_t keep);

/* Input shapes (record_shapes): interned at drain time as raw entries (layout
 * in shape_word.h), ids stable until the next opprof_start.  id 0 means "none
 * recorded".  A reader copies the table once (opprof_shape_export: the words of
 * every entry back to back, and starts[id] .. starts[id + 1] of each id,
 * n_ids + 1 values; sizes from opprof_shape_count and opprof_shape_words,
 * OPPROF_E_STATE when they no longer match) and makes text for the ids it
 * reads from that copy: opprof_shape_texts writes one JSON document of their
 * shapes, "[[[64, 32], [32, 16], []], ...]" ([] = 0-d, null = none), and
 * their dtype texts joined by "\n", each "float64;;Scalar=2" (one per
 * argument, empty = not an operand); free both with opprof_text_free. */
uint32_t opprof_shape_count(void);
int64_t opprof_shape_words(void);
int opprof_shape_export(int64_t *words, int64_t n_words, int64_t *starts, uint32_t n_ids);
int opprof_shape_texts(const int64_t *words, int64_t n_words, const int64_t *starts, uint32_t n_ids,
                       const uint32_t *ids, int64_t n, char **shape_doc, char **dtype_doc);
void opprof_text_free(char *text);

/* Python call sites (with_stack): one text per id, frames joined by "\n",
 * innermost first, each "file(line): function". */
const char *opprof_stack_get(uint32_t id);
uint32_t opprof_stack_count(void);

/* ---- record_function scopes ------------------------------------------- */
int opprof_scope_push(uint32_t name_id);
int opprof_scope_pop(uint32_t flags);
int32_t opprof_scope_depth(void); /* events open on the calling thread (scopes and ops) */
/* Closes the calling thread's open events down to `depth`; returns how many. */
int32_t opprof_scope_unwind(int32_t depth);

/* ---- threads left out of the figures ------------------------------------- */
/* Replace the list of OS thread ids whose ops, scopes and allocations are not
 * recorded, from the next session on (the plugin: threads a test left running). */
int opprof_mute_threads(const uint64_t *tids, int64_t n);

/* ---- run-queue waits at round boundaries (sched_probe.c) ------------------ */
/* The calling thread's (ns on a CPU, ns waiting for one) into out[0..1], from its
 * schedstat file, kept open.  OPPROF_E_UNSUPPORTED where Linux does not say. */
int opprof_sched_own(int64_t *out);
/* Every other thread of this process: begin=1 keeps each one's reading in the
 * probe; begin=0 writes into out[0..1] the (run, wait) ns they added since then (a
 * thread started since counts from its start; one that exited takes its figures
 * with it).  Probes share the open files; each keeps its own readings. */
typedef struct opprof_sched_probe opprof_sched_probe;
opprof_sched_probe *opprof_sched_probe_new(void);
void opprof_sched_probe_free(opprof_sched_probe *probe);
int opprof_sched_others(opprof_sched_probe *probe, int begin, int64_t *out);
/* Close the shared files (a later call opens them again). */
void opprof_sched_close(void);

/* ---- tree helper for events from sources without native parents -------- */
/* Given n events sorted by (thread, start asc, end desc), write into parent[i]
 * the row index of the innermost event on the same thread whose interval
 * contains event i, or -1.  O(n) stack sweep. */
int opprof_nest_sorted(const uint64_t *thread, const int64_t *start, const int64_t *end, int64_t n,
                       int64_t *parent);
