/* The watchdog: one thread per world that aborts the job when an operation has
 * been in flight for longer than the timeout.
 *
 * A thread rather than timed waits inside every operation, because MPI's own
 * blocking collectives (the MPI path) cannot be given a deadline. Operations link
 * themselves into the world's list while they run; the thread scans the list a
 * few times per timeout, which costs the operations only a lock each. */
#include <math.h>
#include <stdio.h>

#include "comm/internal.h"
#include "core/timer.h"

void bpc_watch_add(bp_world *w, op_ctx *op) {
    pthread_mutex_lock(&w->mu);
    if (w->timeout > 0) {
        op->deadline = bp_now() + w->timeout;
        op->prev = NULL;
        op->next = w->ops;
        if (w->ops) w->ops->prev = op;
        w->ops = op;
    }
    pthread_mutex_unlock(&w->mu);
}

void bpc_watch_remove(bp_world *w, op_ctx *op) {
    if (op->deadline == 0) return;
    pthread_mutex_lock(&w->mu);
    if (op->prev)
        op->prev->next = op->next;
    else
        w->ops = op->next;
    if (op->next) op->next->prev = op->prev;
    pthread_mutex_unlock(&w->mu);
}

/* One line naming the rank, the group and the operation; then the whole job ends,
 * after a grace that lets the other ranks whose waits time out about now say whom
 * they wait for too: under pipelines and tensor parallelism ranks wait in chains,
 * and the hung rank is the one named that prints nothing. */
static void fire(bp_world *w, const op_ctx *op) {
    int world_rank = -1;
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    char size[48] = "", peer[64] = "";
    if (op->n) snprintf(size, sizeof size, " of %zu floats", op->n);
    int waiting = atomic_load(&op->waiting_for);
    if (waiting >= 0) snprintf(peer, sizeof peer, " waiting for world rank %d", waiting);
    fprintf(stderr,
            "bagpipe: watchdog: rank %d of group '%s' (world rank %d): %s%s has not finished "
            "after %.1f s%s; aborting the job\n",
            op->c->rank, op->c->name, world_rank, op->name, size, w->timeout, peer);
    fflush(stderr);
    pthread_mutex_unlock(&w->mu);
    bp_sleep_until(bp_now() + fmin(1.0, w->timeout / 2));
    MPI_Abort(MPI_COMM_WORLD, 1);
}

static void *watch(void *arg) {
    bp_world *w = arg;
    pthread_mutex_lock(&w->mu);
    while (!w->stop_watching) {
        double now = bp_now();
        for (const op_ctx *op = w->ops; op; op = op->next)
            if (now > op->deadline) fire(w, op);
        bpc_cond_wait_until(&w->wake, &w->mu, now + fmin(fmax(w->timeout / 20, 0.001), 0.5));
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

bp_status bpc_watch_set_timeout(bp_world *w, double seconds, bp_err *err) {
    if (!(seconds >= 0) || !isfinite(seconds))
        return bp_fail(err, BP_EUSAGE, "watchdog timeout must be >= 0 seconds, not %g", seconds);
    pthread_mutex_lock(&w->mu);
    w->timeout = seconds;
    bool start = seconds > 0 && !w->watching;
    if (start) w->watching = pthread_create(&w->watcher, NULL, watch, w) == 0;
    bool failed = start && !w->watching;
    pthread_mutex_unlock(&w->mu);
    if (failed) return bp_fail(err, BP_EINTERNAL, "cannot start the watchdog thread");
    return BP_OK;
}

void bpc_watch_stop(bp_world *w) {
    pthread_mutex_lock(&w->mu);
    bool joining = w->watching;
    w->stop_watching = true;
    pthread_cond_signal(&w->wake);
    pthread_mutex_unlock(&w->mu);
    if (joining) pthread_join(w->watcher, NULL);
    w->watching = false;
}
