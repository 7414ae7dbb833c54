/* Profiling for the tuner (plan/tune_search.h): block and stage times, memory, and
 * the machine's load, measured in this process. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/finite.h"
#include "core/timer.h"
#include "parallel/partition.h"
#include "plan/sim_kernels.h"
#include "plan/sim_standins.h"
#include "plan/tune_impl.h"
#include "plan/sim_wake.h"

/* Zeroing the gradients, their finiteness check and sum of squares and the optimizer
 * step of one replica: what a stage does per replica between two pipelines. */
static bp_status time_update(const tuner *t, bp_model *m, double *secs, bp_err *err) {
    bp_optim o;
    size_t n = bp_model_num_params(m);
    bp_status rc = bp_optim_init(&o, &t->c->optim, n, err);
    double best = DBL_MAX;
    for (int i = 0; rc == BP_OK && i <= TIMING_RUNS; i++) { /* run 0 warms caches */
        double t0 = bp_now();
        bp_model_zero_grad(m);
        (void)bp_all_finite(bp_model_grads(m), n);
        (void)bp_grad_sumsq(bp_model_grads(m), n);
        bp_optim_step(&o, bp_model_params(m), bp_model_grads(m), 1e-3);
        double dt = bp_now() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    bp_optim_free(&o);
    *secs = best;
    return rc;
}

/* Mean forward and backward CPU time of rb[0..N) taking turns; round 0 warms up. */
static bp_status time_passes(tuner *t, bp_range_bench **rb, int N, bp_sim_stage *st, bp_err *err) {
    double tm[4];
    bp_status rc = BP_OK;
    int n = 0;
    for (int i = 0; rc == BP_OK && i <= STAGE_RUNS; i++)
        for (int j = 0; rc == BP_OK && j < N; j++) {
            rc = bp_range_bench_pass(rb[j], tm, err);
            if (i == 0) continue;
            st->fwd_s += tm[1], st->bwd_s += tm[3], n++;
            t->wall_s += tm[0] + tm[2];
            t->cpu_s += tm[1] + tm[3];
        }
    st->fwd_s /= n > 0 ? n : 1;
    st->bwd_s /= n > 0 ? n : 1;
    return rc;
}

/* Stage s of setup u: its times, memory and update. */
static bp_status time_stage(tuner *t, bp_tune_setup *u, int s, bp_err *err) {
    const bp_tune_size *p = &t->sizes[u->size];
    bp_sim_stage *st = &u->stage[s];
    int b0 = p->first[s], b1 = p->first[s + 1], made = 0;
    bp_status rc = BP_OK;
    bp_range_bench **rb = calloc((size_t)u->N, sizeof *rb);
    if (!rb) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (; rc == BP_OK && made < u->N; made += rc == BP_OK)
        rc = bp_range_bench_create(&t->c->model, b0, b1, p->micro_B, t->T, &rb[made], err);
    *st = (bp_sim_stage){0};
    if (rc == BP_OK) rc = time_passes(t, rb, u->N, st, err);
    bp_model *m = rc == BP_OK ? bp_range_bench_model(rb[0]) : NULL;
    if (rc == BP_OK) rc = time_update(t, m, &st->update_s, err);
    if (rc == BP_OK) {
        size_t param_bytes = bp_model_num_params(m) * sizeof(bp_real);
        st->act_bytes = bp_range_bench_act_bytes(rb[0]);
        st->replica_bytes = param_bytes * (size_t)(2 + bp_optim_num_buffers(&t->c->optim)) +
                            bp_model_workspace_bytes(m);
        st->out_bytes = (size_t)p->micro_B * (size_t)t->T *
                        (size_t)bp_model_boundary_width(&t->c->model, b1) * sizeof(bp_real);
    }
    for (int j = 0; j < made; j++) bp_range_bench_destroy(rb[j]);
    free(rb);
    return rc;
}

static bp_status time_setup(tuner *t, bp_tune_setup *u, bp_err *err) {
    u->stage = calloc((size_t)t->S, sizeof *u->stage);
    if (!u->stage) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_status rc = BP_OK;
    for (int s = 0; rc == BP_OK && s < t->S; s++) rc = time_stage(t, u, s, err);
    return rc;
}

/* The stages of a micro-batch size: --partition, or balanced on its blocks' CPU
 * times (which a loaded machine disturbs less than wall-clock times). */
static bp_status cut_stages(const tuner *t, bp_tune_size *p, bp_err *err) {
    if (!(p->first = calloc((size_t)t->S + 1, sizeof *p->first)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    if (t->c->partition[0])
        return bp_partition_parse(t->c->partition, t->n_blocks, t->S, p->first, err)
                   ? bp_err_context(err, "option --partition")
                   : BP_OK;
    double *cost = malloc((size_t)t->n_blocks * sizeof *cost);
    bp_block_profile *prof = malloc((size_t)t->n_blocks * sizeof *prof);
    bp_status rc = cost && prof ? BP_OK : bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc == BP_OK) rc = bp_profile_blocks_split(&t->c->model, 1, p->micro_B, t->T, prof, err);
    for (int b = 0; rc == BP_OK && b < t->n_blocks; b++)
        cost[b] = prof[b].fwd_cpu_s + prof[b].bwd_cpu_s;
    if (rc == BP_OK) bp_partition_balance(cost, t->n_blocks, t->S, p->first);
    free(cost);
    free(prof);
    return rc;
}

/* The job's other ranks stood for by threads over a stage's blocks, N replicas each. */
static bp_status standins(const tuner *t, int n, int N, int micro_B, bp_sim_standins **out,
                          bp_err *err) {
    int blocks = (t->n_blocks + t->S - 1) / t->S;
    return bp_sim_standins_start(n, &t->c->model, blocks, 1, N, micro_B, t->T, out, err);
}

/* The wake delay (plan/sim_wake.h) at a middle micro-batch size, a stage's blocks. */
static bp_status measure_wake(const tuner *t, double *wake, bp_err *err) {
    int blocks = (t->n_blocks + t->S - 1) / t->S, micro_B = t->sizes[t->n_sizes / 2].micro_B;
    return bp_measure_wake(&t->c->model, blocks, micro_B, t->T, t->c->poll_s, 500, wake, err);
}

/* Profile with the job's other ranks standing by as companion threads: W - 1
 * while one thread computes, W - 2 while two hand a token over. */
static void progress(const tuner *t, int done, int others) {
    if (t->c->progress)
        t->c->progress(t->c->progress_ctx, done, t->n_sizes + t->n_setups, others);
}

bp_status bp_tune_profile(tuner *t, bp_err *err) {
    int others = t->c->busy_threads >= 0 ? t->c->busy_threads : t->W - 1;
    bp_status rc = BP_OK;
    bp_sim_standins *ss = NULL;
    progress(t, 0, others);
    for (int i = 0; rc == BP_OK && i < t->n_sizes; i++) {
        rc = standins(t, others, 1, t->sizes[i].micro_B, &ss, err);
        if (rc == BP_OK) rc = cut_stages(t, &t->sizes[i], err);
        bp_sim_standins_stop(ss);
        progress(t, i + 1, others);
    }
    for (int j = 0; rc == BP_OK && j < t->n_setups; j++) {
        bp_tune_setup *u = &t->setups[j];
        u->micro_B = t->sizes[u->size].micro_B;
        u->first = t->sizes[u->size].first;
        rc = standins(t, others, u->N, u->micro_B, &ss, err);
        if (rc == BP_OK) rc = time_setup(t, u, err);
        bp_sim_standins_stop(ss);
        progress(t, t->n_sizes + j + 1, others);
    }
    if (rc == BP_OK && t->W > 1 && t->c->wake_ms < 0) {
        rc = standins(t, others - 1, 1, t->sizes[0].micro_B, &ss, err);
        if (rc == BP_OK) rc = measure_wake(t, &t->wake_s, err);
        bp_sim_standins_stop(ss);
    }
    if (rc == BP_OK) rc = bp_sim_time_kernels(&t->c->optim, &t->kernels, err);
    return rc;
}

/* How much slower than its CPU time a computation runs here, now (or --load). */
double bp_tune_slowdown(const tuner *t) {
    if (t->c->load >= 1) return t->c->load;
    return t->cpu_s > 0 && t->wall_s > t->cpu_s ? t->wall_s / t->cpu_s : 1.0;
}

/* Bytes per second of copying a buffer like the largest activation message: a
 * message between two processes on one machine is copied twice (into shared
 * memory and out of it), so a message moves at half this rate. */
static double copy_rate(size_t bytes) {
    if (bytes < 4096) bytes = 4096;
    unsigned char *a = bp_alloc(bytes), *b = bp_alloc(bytes);
    double best = DBL_MAX;
    for (int i = 0; a && b && i <= TIMING_RUNS; i++) {
        double t0 = bp_now();
        memcpy(b, a, bytes);
        double dt = bp_now() - t0;
        if (i > 0 && dt < best) best = dt;
    }
    bp_free(a), bp_free(b);
    return best > 0 && best < DBL_MAX ? (double)bytes / best : 0;
}

/* How long messages take: the emulated network, or shared memory. */
void bp_tune_set_link(tuner *t) {
    t->link.net = t->c->net;
    size_t largest = 0;
    for (int i = 0; i < t->n_setups; i++)
        for (int s = 0; s < t->S; s++)
            if (t->setups[i].stage[s].out_bytes > largest) largest = t->setups[i].stage[s].out_bytes;
    t->link.msg_s = t->c->msg_us * 1e-6;
    t->link.copy_Bps = copy_rate(largest) / 2;
}

