/* Fork safety of the native locks (tests/test_fork.py).
 *
 * A forked child has one thread, the one that called fork(); a lock another
 * thread held at that moment stays locked in the child forever.  A test that
 * forks (multiprocessing's "fork" context, ProcessPoolExecutor) while other
 * threads use numpy gave children whose first new thread blocked on the
 * memory counters' thread list or the thread registry: Python allocates as
 * a thread starts, and the hooks count it.
 *
 * Two kinds of lock, two treatments:
 * - Leaf locks, whose holders never wait for anything (the GIL included)
 *   while holding them: the thread registry, the memory counters' thread
 *   list, the name table, the drain pool.  The prepare handler takes them,
 *   in the order the code nests them (registry before the thread list: a
 *   state retired under the registry frees Python objects, which the
 *   counters see), so the child gets each structure whole; both sides
 *   release them after.
 * - Locks held across a wait for the GIL or a slow call: the control lock
 *   and the shape/stack tables (start and drain take the GIL inside them),
 *   and the CUDA lock (dlopen, CUDA calls).  fork() from Python runs with the
 *   GIL held, so taking them here could wait forever for a thread that waits
 *   for the GIL.  The child re-initialises them instead, as CPython does
 *   with its own locks: a child cannot be inside start, a drain or a CUDA
 *   call, since those threads are not in it.
 * In the child every thread state but the forking thread's belongs to a
 * thread that does not exist there: they are marked exited, so their slots
 * are reused and the next session frees their buffers.
 */
#include <pthread.h>

#include "core_internal.h"
#include "hotpath.h"

static void core_atfork(int phase)
{
    switch (phase) {
    case OPPROF_FORK_PREPARE: pthread_mutex_lock(&core_g.registry); return;
    case OPPROF_FORK_PARENT: pthread_mutex_unlock(&core_g.registry); return;
    default: break;
    }
    pthread_mutex_init(&core_g.ctl, NULL);
    for (opprof_thread *t = core_g.threads; t != NULL; t = t->next)
        if (t != opprof_tls_state)
            t->alive = 0;
    /* The forking thread's counter counts the parent's thread (its page is
     * shared with the parent): the child's own thread needs its own. */
    if (opprof_tls_state != NULL) {
        core_switches_close(opprof_tls_state);
        core_switches_open(opprof_tls_state);
    }
    pthread_mutex_unlock(&core_g.registry);
}

static void run(int phase)
{
    if (phase == OPPROF_FORK_PREPARE) {
        core_atfork(phase);
        opprof_mem_count_atfork(phase);
        opprof_strtab_atfork(phase);
        opprof_pool_atfork(phase);
        opprof_cuda_atfork(phase);
        return;
    }
    /* Reverse order: the last lock taken is released first. */
    opprof_cuda_atfork(phase);
    opprof_pool_atfork(phase);
    opprof_strtab_atfork(phase);
    opprof_mem_count_atfork(phase);
    core_atfork(phase);
}

static void prepare(void) { run(OPPROF_FORK_PREPARE); }
static void parent(void) { run(OPPROF_FORK_PARENT); }
static void child(void) { run(OPPROF_FORK_CHILD); }

/* At load: any fork after the extension is imported may find a lock held. */
__attribute__((constructor)) static void register_atfork(void)
{
    pthread_atfork(prepare, parent, child);
}
