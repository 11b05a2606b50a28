/* Memory held by the core's thread states: see buffers.h. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include "core_internal.h"
#include "buffers.h"

static int64_t state_bytes(const opprof_thread *t)
{
    int64_t bytes = (int64_t)sizeof *t;
    for (const core_chunk *c = t->head; c != NULL; c = c->next)
        bytes += core_chunk_bytes(c);
    bytes += (int64_t)(t->shapes.nchunks + t->stacks.nchunks) * OPPROF_ARENA_WORDS *
             (int64_t)sizeof(int64_t);
    return bytes;
}

int opprof_buffer_stats(int64_t *bytes, int64_t *live, int64_t *dead, int64_t *parked)
{
    if (bytes == NULL || live == NULL || dead == NULL || parked == NULL)
        return opprof_fail(OPPROF_E_ARG, "opprof_buffer_stats: NULL output");
    int64_t total = 0, n_live = 0, n_dead = 0, n_parked = 0;
    pthread_mutex_lock(&core_g.ctl);
    pthread_mutex_lock(&core_g.registry);
    for (const opprof_thread *t = core_g.threads; t != NULL; t = t->next) {
        total += state_bytes(t);
        if (t->alive)
            n_live++;
        else
            n_dead++;
    }
    for (const opprof_thread *t = core_g.free_list; t != NULL; t = t->next) {
        total += state_bytes(t);
        n_parked++;
    }
    pthread_mutex_unlock(&core_g.registry);
    pthread_mutex_unlock(&core_g.ctl);
    *bytes = total;
    *live = n_live;
    *dead = n_dead;
    *parked = n_parked;
    return OPPROF_OK;
}
