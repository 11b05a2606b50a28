/* Hot-path cost of the native core, measured in C (no cffi, no Python per op).
 * Built and run by bench/bench_core_hotpath.py; prints one line per case:
 * "<case> <median ns per iteration>".  "cold": 1M events per session, most of
 * them landing in freshly allocated (page-faulting) buffer chunks. */
#include <Python.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "opprof_internal.h"

#define N 1000000
#define N_WARM 60000 /* fits the buffer chunks a thread keeps between sessions */
#define REPEATS 7

static int64_t now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef void (*body_fn)(opprof_thread *t, uint32_t id);

static void pair(opprof_thread *t, uint32_t id)
{
    opprof_op_begin(t, id, OPPROF_KIND_NUMPY);
    opprof_op_end(t, 0);
}

static void pair_shapes(opprof_thread *t, uint32_t id)
{
    static const int64_t dims[2] = {64, 32};
    if (opprof_op_begin(t, id, OPPROF_KIND_NUMPY) == 0) {
        opprof_op_shape_arg(t, 2, dims, 12);
        opprof_op_shape_arg(t, 2, dims, 12);
    }
    opprof_op_end(t, 0);
}

static void ticks_only(opprof_thread *t, uint32_t id)
{
    volatile uint64_t x = opprof_ticks();
    (void)x;
}

static void run(const char *name, body_fn body, int record, uint32_t options, uint32_t id, int n)
{
    double per[REPEATS];
    for (int r = 0; r < REPEATS; r++) {
        if (record && opprof_start(options) != OPPROF_OK) {
            fprintf(stderr, "start: %s\n", opprof_last_error());
            exit(1);
        }
        opprof_thread *t = opprof_thread_get();
        int64_t t0 = now();
        for (int i = 0; i < n; i++)
            body(t, id);
        per[r] = (double)(now() - t0) / n;
        if (record) {
            opprof_stop();
            if (opprof_pending() != n) {
                fprintf(stderr, "%s: %lld events, expected %d\n", name,
                        (long long)opprof_pending(), n);
                exit(1);
            }
        }
    }
    qsort(per, REPEATS, sizeof *per, cmp);
    printf("%s %.1f\n", name, per[REPEATS / 2]);
}

int main(void)
{
    Py_Initialize();
    uint32_t id;
    if (opprof_init() != OPPROF_OK || opprof_name_intern("bench", &id) != OPPROF_OK ||
        opprof_set_capacity(N) != OPPROF_OK) {
        fprintf(stderr, "init: %s\n", opprof_last_error());
        return 1;
    }
    printf("clock %s\n", opprof_clock_source());
    run("ticks", ticks_only, 0, 0, id, N);
    run("begin_end_idle", pair, 0, 0, id, N);
    run("begin_end_recording", pair, 1, 0, id, N_WARM);
    run("begin_end_2_shapes", pair_shapes, 1, OPPROF_OPT_RECORD_SHAPES, id, N_WARM);
    run("begin_end_cold", pair, 1, 0, id, N);
    Py_Finalize();
    return 0;
}
