/* C_FP_A: asynchronous averaging on a background thread (comm.h).
 *
 * Agreeing on the end: every round averages n + 1 floats, the snapshot and a
 * stop flag that is 1 on a rank that asked to stop. A positive average flag ends
 * the loop on every rank after that same round, so no thread is ever left in a
 * collective that the others will not join, and all ranks count the same rounds. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "core/buf.h"
#include "core/timer.h"

struct bp_async_avg {
    bp_comm *c;   /* charged and named */
    bp_comm *dup; /* carries the thread's traffic */
    float *x;
    size_t n;
    double interval_s;
    float *snap; /* the snapshot s: n floats */
    float *avg;  /* the average a: n + 1 floats, the last one the stop flag */
    float *cur;  /* x on a device: its host copy while adding a - s (else NULL) */
    pthread_mutex_t x_mu;
    /* The thread's turn at x_mu: the step releases it between steps and takes it
     * again at once, before a woken waiter runs, so the thread would wait steps for
     * it; a step instead lets a waiting thread in first. */
    pthread_mutex_t turn_mu;
    pthread_cond_t turn;
    bool thread_waits;
    pthread_mutex_t wait_mu;
    pthread_cond_t wake; /* a stop request cuts the wait between rounds short */
    pthread_t thread;
    bool thread_started;
    atomic_bool stop_asked, running;
    atomic_uint_least64_t rounds;
    bp_status status;
};

static void wait_interval(bp_async_avg *a, double until) {
    pthread_mutex_lock(&a->wait_mu);
    while (!atomic_load(&a->stop_asked) && bpc_cond_wait_until(&a->wake, &a->wait_mu, until)) {
    }
    pthread_mutex_unlock(&a->wait_mu);
}

/* x into host floats: copied, or through the group's memory where x is a device's. */
static void read_x(const bp_async_avg *a, float *host) {
    if (a->cur)
        a->c->mem.to_host(a->c->mem.ctx, host, a->x, a->n * sizeof *a->x);
    else
        memcpy(host, a->x, a->n * sizeof *a->x);
}

/* The thread takes x_mu at the next step boundary (bp_async_avg_lock). */
static void thread_lock(bp_async_avg *a) {
    pthread_mutex_lock(&a->turn_mu);
    a->thread_waits = true;
    pthread_mutex_unlock(&a->turn_mu);
    pthread_mutex_lock(&a->x_mu);
    pthread_mutex_lock(&a->turn_mu);
    a->thread_waits = false;
    pthread_cond_broadcast(&a->turn);
    pthread_mutex_unlock(&a->turn_mu);
}

/* One round; *stop tells whether some rank asked to end. */
static bp_status round_once(bp_async_avg *a, bool *stop) {
    size_t n = a->n;
    thread_lock(a);
    read_x(a, a->snap);
    pthread_mutex_unlock(&a->x_mu);
    memcpy(a->avg, a->snap, n * sizeof *a->x);
    a->avg[n] = atomic_load(&a->stop_asked) ? 1.0f : 0.0f;
    op_ctx op;
    bpc_op_begin(&op, a->c, BP_OP_ASYNC_AVG, n);
    bp_status rc = bpc_op_end(
        &op, bpc_run_prim(&op, a->dup, a->avg, n + 1, NODE_SHARE, bpc_flat_allreduce_avg, NULL));
    if (rc != BP_OK) return rc;
    thread_lock(a);
    if (a->cur) { /* on a device: through a host copy, the step held off by the lock */
        read_x(a, a->cur);
        for (size_t i = 0; i < n; i++) a->cur[i] += a->avg[i] - a->snap[i];
        a->c->mem.to_device(a->c->mem.ctx, a->x, a->cur, n * sizeof *a->x);
    } else {
        for (size_t i = 0; i < n; i++) a->x[i] += a->avg[i] - a->snap[i];
    }
    pthread_mutex_unlock(&a->x_mu);
    atomic_fetch_add(&a->rounds, 1);
    *stop = a->avg[n] > 0.0f;
    return BP_OK;
}

static void *async_main(void *arg) {
    bp_async_avg *a = arg;
    bool stop = false;
    bp_trace_thread(a->c->trace, "async averaging");
    for (double next = bp_now() + a->interval_s; !stop; next += a->interval_s) {
        wait_interval(a, next);
        a->status = round_once(a, &stop);
        if (a->status != BP_OK) break;
        /* A round longer than the interval starts the next one at once, not a burst. */
        if (next < bp_now()) next = bp_now();
    }
    atomic_store(&a->running, false);
    return NULL;
}

static bp_status async_new(bp_comm *c, float *x, size_t n, int interval_ms, bp_async_avg **out,
                           bp_err *err) {
    if (interval_ms < 1)
        return bp_fail(err, BP_EUSAGE, "sync interval %d ms must be >= 1", interval_ms);
    bp_async_avg *a = calloc(1, sizeof *a);
    if (!a) return bp_fail(err, BP_ENOMEM, "cannot allocate the async state");
    *out = a;
    a->c = c, a->x = x, a->n = n, a->interval_s = interval_ms * 1e-3;
    pthread_mutex_init(&a->x_mu, NULL);
    pthread_mutex_init(&a->turn_mu, NULL);
    pthread_cond_init(&a->turn, NULL);
    pthread_mutex_init(&a->wait_mu, NULL);
    bpc_cond_init_monotonic(&a->wake);
    bp_status rc =
        bp_alloc_checked((void **)&a->snap, (n + 1) * sizeof(float), "async snapshot", err);
    if (rc == BP_OK)
        rc = bp_alloc_checked((void **)&a->avg, (n + 1) * sizeof(float), "async average", err);
    if (rc == BP_OK && bpc_on_device(c, x))
        rc = bp_alloc_checked((void **)&a->cur, (n + 1) * sizeof(float), "async host copy", err);
    return rc;
}

bp_status bp_async_avg_start(bp_comm *c, float *x, size_t n, int interval_ms, bp_async_avg **out) {
    bp_err err;
    bp_async_avg *a = NULL;
    bp_status rc = async_new(c, x, n, interval_ms, &a, &err);
    if (rc == BP_OK)
        rc = bp_comm_dup(c, NULL, &a->dup);
    else
        bpc_comm_record(c, rc, &err);
    if (rc == BP_OK) {
        atomic_store(&a->running, true);
        a->thread_started = pthread_create(&a->thread, NULL, async_main, a) == 0;
        if (!a->thread_started) {
            atomic_store(&a->running, false);
            bp_fail(&err, BP_EINTERNAL, "cannot start the averaging thread");
            rc = bpc_comm_record(c, BP_EINTERNAL, &err);
        }
    }
    if (rc != BP_OK) {
        bp_async_avg_destroy(a);
        a = NULL;
    }
    *out = a;
    return rc;
}

void bp_async_avg_lock(bp_async_avg *a) {
    pthread_mutex_lock(&a->turn_mu);
    while (a->thread_waits) pthread_cond_wait(&a->turn, &a->turn_mu);
    pthread_mutex_unlock(&a->turn_mu);
    pthread_mutex_lock(&a->x_mu);
}
void bp_async_avg_unlock(bp_async_avg *a) { pthread_mutex_unlock(&a->x_mu); }
bool bp_async_avg_running(bp_async_avg *a) { return atomic_load(&a->running); }
uint64_t bp_async_avg_rounds(bp_async_avg *a) { return atomic_load(&a->rounds); }

bp_status bp_async_avg_stop(bp_async_avg *a) {
    pthread_mutex_lock(&a->wait_mu);
    atomic_store(&a->stop_asked, true);
    pthread_cond_signal(&a->wake);
    pthread_mutex_unlock(&a->wait_mu);
    if (a->thread_started) pthread_join(a->thread, NULL);
    a->thread_started = false;
    return a->status;
}

void bp_async_avg_destroy(bp_async_avg *a) {
    if (!a) return;
    bp_async_avg_stop(a);
    bp_comm_destroy(a->dup);
    bp_free(a->snap);
    bp_free(a->avg);
    bp_free(a->cur);
    pthread_mutex_destroy(&a->x_mu);
    pthread_mutex_destroy(&a->turn_mu);
    pthread_cond_destroy(&a->turn);
    pthread_mutex_destroy(&a->wait_mu);
    pthread_cond_destroy(&a->wake);
    free(a);
}
