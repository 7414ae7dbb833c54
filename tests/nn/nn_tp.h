/* Tensor-parallel shard sets in one process, for the nn/ tests: one thread per tp
 * rank runs that rank's shard, and the ranks' allreduce is a callback built on a
 * pthread barrier that sums into a shared buffer.
 *
 * The worker threads never call cmocka (its failures longjmp on the calling
 * thread): jobs record statuses and the main thread asserts on them. */
#ifndef BP_TESTS_NN_TP_H
#define BP_TESTS_NN_TP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nn/model.h"

#define TP_MAX 4

typedef struct tp_team tp_team;

typedef struct tp_member {
    tp_team *team;
    int rank;
    long calls; /* allreduce calls this rank made */
} tp_member;

struct tp_team {
    int size;
    pthread_t thread[TP_MAX];
    tp_member member[TP_MAX];
    pthread_barrier_t go, done; /* the main thread and the workers: one job */
    pthread_barrier_t sync;     /* the workers, inside an allreduce */
    void (*job)(void *ctx, int rank);
    void *ctx;
    bool quit;
    /* allreduce state */
    bp_real *x[TP_MAX];
    size_t n[TP_MAX];
    bp_real *sum;
    size_t cap;
    bool mismatch; /* the ranks of one call passed different n */
    long fail_at;  /* the call (1-based, per rank) at which every rank fails; 0: never */
};

/* The bp_tp callback: ranks post their buffers, rank 0 sums them in rank order into
 * the shared buffer (so every rank gets the same bits), every rank copies the sum. */
static bp_status tp_allreduce(void *ctx, bp_real *x, size_t n) {
    tp_member *me = ctx;
    tp_team *t = me->team;
    if (++me->calls == t->fail_at) return BP_ECOMM; /* on every rank: no one waits */
    t->x[me->rank] = x;
    t->n[me->rank] = n;
    pthread_barrier_wait(&t->sync);
    if (me->rank == 0) {
        t->mismatch = n > t->cap;
        for (int r = 1; r < t->size; r++) t->mismatch |= t->n[r] != n;
        for (size_t i = 0; !t->mismatch && i < n; i++) {
            bp_real s = t->x[0][i];
            for (int r = 1; r < t->size; r++) s += t->x[r][i];
            t->sum[i] = s;
        }
    }
    pthread_barrier_wait(&t->sync);
    if (t->mismatch) return BP_EINTERNAL;
    memcpy(x, t->sum, n * sizeof *x);
    return BP_OK;
}

static void *tp_worker(void *p) {
    tp_member *me = p;
    tp_team *t = me->team;
    for (;;) {
        pthread_barrier_wait(&t->go);
        if (t->quit) return NULL;
        t->job(t->ctx, me->rank);
        pthread_barrier_wait(&t->done);
    }
}

/* size worker threads; allreduces of up to cap elements. Returns 0 on success. */
static int tp_team_start(tp_team *t, int size, size_t cap) {
    memset(t, 0, sizeof *t);
    t->size = size;
    t->cap = cap;
    t->sum = malloc(cap * sizeof *t->sum);
    if (!t->sum || size < 1 || size > TP_MAX) return -1;
    pthread_barrier_init(&t->go, NULL, (unsigned)size + 1);
    pthread_barrier_init(&t->done, NULL, (unsigned)size + 1);
    pthread_barrier_init(&t->sync, NULL, (unsigned)size);
    for (int r = 0; r < size; r++) {
        t->member[r] = (tp_member){t, r, 0};
        if (pthread_create(&t->thread[r], NULL, tp_worker, &t->member[r])) return -1;
    }
    return 0;
}

/* Runs job(ctx, rank) on every worker and returns when all are done. */
static void tp_team_run(tp_team *t, void (*job)(void *ctx, int rank), void *ctx) {
    t->job = job;
    t->ctx = ctx;
    pthread_barrier_wait(&t->go);
    pthread_barrier_wait(&t->done);
}

static void tp_team_stop(tp_team *t) {
    t->quit = true;
    pthread_barrier_wait(&t->go);
    for (int r = 0; r < t->size; r++) pthread_join(t->thread[r], NULL);
    pthread_barrier_destroy(&t->go);
    pthread_barrier_destroy(&t->done);
    pthread_barrier_destroy(&t->sync);
    free(t->sum);
}

static bp_tp tp_of(tp_team *t, int rank) {
    return (bp_tp){
        .rank = rank, .size = t->size, .allreduce_sum = tp_allreduce, .ctx = &t->member[rank]};
}

/* ---- a shard set: one model shard and its activations per tp rank ---- */

typedef struct tp_set {
    int size;
    tp_team team;
    bp_model *m[TP_MAX];
    bp_acts *a[TP_MAX];
    /* arguments and results of the last forward/backward */
    const bp_batch *batch;
    const bp_real *x_in, *dy;
    bp_real *dx[TP_MAX];
    double loss[TP_MAX];
    int rc[TP_MAX];
    bp_err err[TP_MAX];
} tp_set;

/* Shards of [begin, end) over size ranks for micro-batches of B x T. Returns a
 * status (0 when all is well). */
static int tp_set_create(tp_set *s, bp_model_config cfg, int begin, int end, int size, int B,
                         int T) {
    memset(s, 0, sizeof *s);
    s->size = size;
    if (tp_team_start(&s->team, size, (size_t)B * T * cfg.n_embd)) return BP_ENOMEM;
    int rc = BP_OK;
    for (int r = 0; r < size && !rc; r++) {
        bp_tp tp = tp_of(&s->team, r);
        rc = bp_model_create_tp(&cfg, begin, end, &tp, &s->m[r], &s->err[r]);
        if (!rc) rc = bp_acts_create(s->m[r], B, T, &s->a[r], &s->err[r]);
        size_t nin = (size_t)B * T * bp_model_boundary_width(&cfg, begin);
        if (!rc && !bp_model_has_first(s->m[r]) && !(s->dx[r] = malloc(nin * sizeof(bp_real))))
            rc = BP_ENOMEM;
    }
    return rc;
}

static void tp_set_destroy(tp_set *s) {
    tp_team_stop(&s->team);
    for (int r = 0; r < s->size; r++) {
        bp_acts_destroy(s->a[r]);
        bp_model_destroy(s->m[r]);
        free(s->dx[r]);
    }
}

static void tp_forward_job(void *ctx, int r) {
    tp_set *s = ctx;
    s->rc[r] = bp_model_forward(s->m[r], s->a[r], s->batch, s->x_in, &s->loss[r], &s->err[r]);
}

static void tp_backward_job(void *ctx, int r) {
    tp_set *s = ctx;
    s->rc[r] = bp_model_backward(s->m[r], s->a[r], s->batch, s->dy, s->dx[r], 1, &s->err[r]);
}

/* Status of rank 0, or BP_EINTERNAL when the ranks disagree. */
static int tp_set_status(const tp_set *s) {
    for (int r = 1; r < s->size; r++)
        if (s->rc[r] != s->rc[0]) return BP_EINTERNAL;
    return s->rc[0];
}

/* Forward of every shard on batch (x_in: the boundary input, shared). */
static int tp_set_forward(tp_set *s, const bp_batch *batch, const bp_real *x_in) {
    s->batch = batch;
    s->x_in = x_in;
    tp_team_run(&s->team, tp_forward_job, s);
    return tp_set_status(s);
}

/* Backward of every shard (dy: the output gradient, shared); dx[r] gets rank r's
 * boundary input gradient. */
static int tp_set_backward(tp_set *s, const bp_batch *batch, const bp_real *dy) {
    s->batch = batch;
    s->dy = dy;
    tp_team_run(&s->team, tp_backward_job, s);
    return tp_set_status(s);
}

/* Each shard's parameters <- its slice of the parameters of `full`, a model of the
 * same range without tensor parallelism. */
static void tp_set_load(tp_set *s, bp_model *full) {
    for (int r = 0; r < s->size; r++)
        for (int i = 0; i < bp_model_num_tensors(s->m[r]); i++) {
            const bp_tensor_info *t = bp_model_tensor(s->m[r], i),
                                 *f = bp_model_find_tensor(full, t->name);
            bp_tensor_shard_from_full(t, r, s->size, bp_model_params(full) + f->offset,
                                      bp_model_params(s->m[r]) + t->offset);
        }
}

#endif
