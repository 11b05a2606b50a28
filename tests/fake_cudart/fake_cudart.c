/* A fake CUDA runtime for tests on machines without a GPU.
 *
 * Same entry points and calling conventions as libcudart for what
 * pytest-opprof calls; "device" time is host CLOCK_MONOTONIC: an event stores
 * the host time at cudaEventRecord, so the elapsed time of a pair is the host
 * time between its two records.  fake_cudart_* functions let tests read what
 * was called and set the memory cudaMemGetInfo reports.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#define FAKE_NOT_READY 600
#define FAKE_INVALID_VALUE 1
#define FAKE_INVALID_HANDLE 400
#define FAKE_INSUFFICIENT_DRIVER 35

typedef struct fake_event {
    uint32_t magic;
    int recorded;
    int64_t ns;
} fake_event;

static _Atomic int64_t records, creates, destroys, syncs, elapsed_calls;
static _Atomic int64_t used_bytes;
static const int64_t total_bytes = 16LL << 30;

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int cudaGetDeviceCount(int *count)
{
    if (!count)
        return FAKE_INVALID_VALUE;
    if (getenv("FAKE_CUDART_NO_DRIVER")) /* a CUDA toolkit image on a machine without a GPU */
        return FAKE_INSUFFICIENT_DRIVER;
    *count = 1;
    return 0;
}

int cudaEventCreateWithFlags(void **event, unsigned int flags)
{
    (void)flags;
    fake_event *e = calloc(1, sizeof *e);
    if (!e)
        return 2;
    e->magic = 0xC0DAu;
    *event = e;
    atomic_fetch_add(&creates, 1);
    return 0;
}

int cudaEventCreate(void **event) { return cudaEventCreateWithFlags(event, 0); }

int cudaEventRecord(void *event, void *stream)
{
    (void)stream;
    fake_event *e = event;
    if (!e || e->magic != 0xC0DAu)
        return FAKE_INVALID_HANDLE;
    e->ns = now_ns();
    e->recorded = 1;
    atomic_fetch_add(&records, 1);
    return 0;
}

int cudaEventSynchronize(void *event)
{
    fake_event *e = event;
    if (!e || e->magic != 0xC0DAu)
        return FAKE_INVALID_HANDLE;
    atomic_fetch_add(&syncs, 1);
    return 0;
}

int cudaEventElapsedTime(float *ms, void *start, void *end)
{
    fake_event *a = start, *b = end;
    if (!ms || !a || !b || a->magic != 0xC0DAu || b->magic != 0xC0DAu)
        return FAKE_INVALID_HANDLE;
    if (!a->recorded || !b->recorded)
        return FAKE_NOT_READY;
    atomic_fetch_add(&elapsed_calls, 1);
    *ms = (float)((double)(b->ns - a->ns) / 1e6);
    return 0;
}

int cudaEventDestroy(void *event)
{
    fake_event *e = event;
    if (!e || e->magic != 0xC0DAu)
        return FAKE_INVALID_HANDLE;
    e->magic = 0;
    free(e);
    atomic_fetch_add(&destroys, 1);
    return 0;
}

int cudaMemGetInfo(size_t *free_bytes, size_t *total)
{
    *total = (size_t)total_bytes;
    *free_bytes = (size_t)(total_bytes - atomic_load(&used_bytes));
    return 0;
}

const char *cudaGetErrorString(int err)
{
    switch (err) {
    case 0: return "no error";
    case FAKE_NOT_READY: return "device not ready";
    case FAKE_INVALID_HANDLE: return "invalid resource handle";
    case FAKE_INSUFFICIENT_DRIVER: return "CUDA driver version is insufficient for CUDA runtime version";
    default: return "fake cudart error";
    }
}

/* ---- test controls -------------------------------------------------------- */

int64_t fake_cudart_records(void) { return atomic_load(&records); }
int64_t fake_cudart_creates(void) { return atomic_load(&creates); }
int64_t fake_cudart_syncs(void) { return atomic_load(&syncs); }
int64_t fake_cudart_elapsed_calls(void) { return atomic_load(&elapsed_calls); }
void fake_cudart_set_used(int64_t bytes) { atomic_store(&used_bytes, bytes); }
