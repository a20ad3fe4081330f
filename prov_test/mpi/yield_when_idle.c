/*
 * Preloaded into the ranks of MPICH's test suite (prov_test/mpi/mpich_testsuite.sh), on the core's
 * side and on rscntr's alike: a rank whose non-blocking epoll_wait found nothing gives its core
 * away (sched_yield) before it polls again.
 *
 * Why: most of MPICH's RMA tests run 4 ranks (some 3, 7 or 8) and this machine has 2 cores. Each
 * rank busy-polls libfabric while it waits (MPICH's RMA flush and completion loops call the
 * netmod's progress directly, past MPIR_CVAR_CH4_PROGRESS_THROTTLE), and over tcp every poll is
 * an epoll_wait with a zero timeout. A rank that has a message to answer then waits for the
 * scheduler to take the core from a rank that has nothing to do: rma/get_flushlocal with 4 ranks
 * over tcp;ofi_rxm took 16 s here, 0.2 s with 2 ranks, 0.6 s with 4 ranks and this. Yielding
 * after an empty poll is what a rank with a core of its own would amount to: it changes who runs
 * when, never what a call returns.
 *
 * Nothing else is changed: a blocking epoll_wait, one that found events or failed is returned as
 * it was. Over shm, whose polls make no system call, this changes nothing.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stddef.h>
#include <sys/epoll.h>

typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);

int epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    /* Threads that race here store the same address. */
    static epoll_wait_fn next_slot;
    epoll_wait_fn next = __atomic_load_n(&next_slot, __ATOMIC_RELAXED);
    if (next == NULL) {
        next = (epoll_wait_fn)dlsym(RTLD_NEXT, "epoll_wait");
        __atomic_store_n(&next_slot, next, __ATOMIC_RELAXED);
    }
    if (next == NULL) {
        errno = ENOSYS;
        return -1;
    }
    int ready = next(epfd, events, maxevents, timeout);
    if (ready == 0 && timeout == 0)
        sched_yield();
    return ready;
}
