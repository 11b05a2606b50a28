/* Memory for drained events: see drain_pool.h. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "drain_pool.h"
#include "opprof_internal.h"

#define OPPROF_POOL_KEEP_BYTES (64LL << 20) /* at most this much kept between drains */
#define OPPROF_POOL_SLOTS 4                 /* and at most this many blocks */

/* Each block starts with its size; callers get the memory after it, aligned
 * for the event struct (8 bytes; 64 keeps rows on cache-line boundaries). */
#define OPPROF_POOL_HEADER 64

/* A block this large is aligned to it and asks for huge pages: the drain writes
 * every page of a new block once, and a 4 KB page fault per 43 events cost more
 * than the copy (35 of 48 ns an event at a million events). */
#define OPPROF_POOL_HUGE_PAGE (2LL << 20)

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static char *pool[OPPROF_POOL_SLOTS];
static int64_t pool_bytes;

static int64_t block_size(const char *block) { return *(const int64_t *)block; }

void *opprof_pool_take(int64_t bytes)
{
    if (bytes < 0)
        return NULL;
    char *best = NULL;
    int best_i = -1;
    pthread_mutex_lock(&pool_lock);
    for (int i = 0; i < OPPROF_POOL_SLOTS; i++)
        if (pool[i] && block_size(pool[i]) >= bytes &&
            (!best || block_size(pool[i]) < block_size(best))) {
            best = pool[i];
            best_i = i;
        }
    if (best) {
        pool[best_i] = NULL;
        pool_bytes -= block_size(best);
    }
    pthread_mutex_unlock(&pool_lock);
    if (!best) {
        void *p = NULL;
        size_t size = OPPROF_POOL_HEADER + (size_t)bytes;
        int huge = (int64_t)size >= OPPROF_POOL_HUGE_PAGE;
        if (posix_memalign(&p, huge ? OPPROF_POOL_HUGE_PAGE : OPPROF_POOL_HEADER, size) != 0)
            return NULL;
#ifdef MADV_HUGEPAGE
        if (huge)
            madvise(p, size & ~(size_t)(OPPROF_POOL_HUGE_PAGE - 1), MADV_HUGEPAGE);
#endif
        best = p;
        *(int64_t *)best = bytes;
    }
    return best + OPPROF_POOL_HEADER;
}

void opprof_pool_give(void *memory)
{
    if (!memory)
        return;
    char *block = (char *)memory - OPPROF_POOL_HEADER;
    int64_t size = block_size(block);
    pthread_mutex_lock(&pool_lock);
    int slot = -1;
    for (int i = 0; i < OPPROF_POOL_SLOTS && slot < 0; i++)
        if (!pool[i])
            slot = i;
    /* Full: replace the smallest kept block if this one is larger (drains of
     * one suite tend to grow to their largest test, then stay). */
    if (slot < 0) {
        int smallest = 0;
        for (int i = 1; i < OPPROF_POOL_SLOTS; i++)
            if (block_size(pool[i]) < block_size(pool[smallest]))
                smallest = i;
        if (block_size(pool[smallest]) < size) {
            pool_bytes -= block_size(pool[smallest]);
            free(pool[smallest]);
            pool[smallest] = NULL;
            slot = smallest;
        }
    }
    if (slot >= 0 && pool_bytes + size <= OPPROF_POOL_KEEP_BYTES) {
        pool[slot] = block;
        pool_bytes += size;
        block = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    free(block);
}

int64_t opprof_pool_held(void)
{
    pthread_mutex_lock(&pool_lock);
    int64_t held = pool_bytes;
    pthread_mutex_unlock(&pool_lock);
    return held;
}

/* fork.c: a leaf lock, taken across fork() and released on both sides. */
void opprof_pool_atfork(int phase)
{
    if (phase == OPPROF_FORK_PREPARE)
        pthread_mutex_lock(&pool_lock);
    else
        pthread_mutex_unlock(&pool_lock);
}
