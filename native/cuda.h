/* pytest-opprof CUDA event timing (native/cuda.c): the cffi cdef part.
 *
 * The CUDA runtime is opened lazily with dlopen (opprof_cuda_load, path chosen
 * by the Python side: OPPROF_CUDART, torch's or the nvidia wheel's libcudart,
 * the system's).  While a session records with OPPROF_OPT_CUDA, the core's op
 * begin/end record a CUDA event pair on the legacy default stream for every
 * Nth call of each name (opprof_cuda_configure); nothing synchronises while
 * recording.  After opprof_stop, opprof_cuda_resolve waits for the last event
 * once and reads every pair's elapsed time.  Events come from a pool that
 * grows on demand and is reused by later sessions.  Same syntax rules as
 * opprof.h: this is cdef text.
 */

typedef struct opprof_cuda_stats {
    int64_t calls;        /* op begins seen with OPPROF_OPT_CUDA in this session */
    int64_t timed;        /* pairs recorded (sampled calls) */
    int64_t resolved;     /* pairs with an elapsed time after opprof_cuda_resolve */
    int64_t dropped;      /* sampled calls not timed: pool full or a CUDA call failed */
    int64_t pool_events;  /* CUDA events created so far (kept across sessions) */
    int64_t sample_rate;  /* every Nth call of a name is timed */
    int32_t last_error;   /* last cudaError_t seen on the hot path, 0 = none */
    int32_t device_count; /* cudaGetDeviceCount at load */
} opprof_cuda_stats;

/* Open the runtime at `path` and check it reports a device.  Idempotent for
 * the same path; E_UNSUPPORTED with a message naming the path otherwise. */
int opprof_cuda_load(const char *path);
int opprof_cuda_loaded(void);       /* 1 after a successful load */
const char *opprof_cuda_path(void); /* the loaded path, "" if none */

/* Before opprof_start: time every sample_rate-th call of each name (>= 1),
 * at most max_pairs pairs per session; resets counters and results. */
int opprof_cuda_configure(int64_t sample_rate, int64_t max_pairs);

/* After opprof_stop: synchronise on the last recorded event and read every
 * pair's elapsed time. */
int opprof_cuda_resolve(void);

/* Resolved pairs: the core event id and the elapsed device time (ns, not
 * scaled by the sample rate).  `written` <= capacity. */
int opprof_cuda_results(int64_t *event_ids, int64_t *elapsed_ns, int64_t capacity,
                        int64_t *written);

int opprof_cuda_stats_get(opprof_cuda_stats *out);

/* cudaMemGetInfo on the current device, bytes. */
int opprof_cuda_mem_info(int64_t *free_bytes, int64_t *total_bytes);
