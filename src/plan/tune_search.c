/* The tuner's search (plan/tune_search.h): the candidates (N, M, schedule), each
 * profiled setup once, each candidate predicted, fastest first. */
#include <math.h>
#include <stdlib.h>

#include "core/timer.h"
#include "plan/tune_impl.h"

/* *index: the size profile of micro_B, added (not yet measured) if new. */
static bp_status size_index(tuner *t, int micro_B, int *index, bp_err *err) {
    for (*index = 0; *index < t->n_sizes; ++*index)
        if (t->sizes[*index].micro_B == micro_B) return BP_OK;
    bp_tune_size *grown = realloc(t->sizes, (size_t)(t->n_sizes + 1) * sizeof *grown);
    if (!grown) return bp_fail(err, BP_ENOMEM, "out of memory");
    t->sizes = grown;
    t->sizes[t->n_sizes++] = (bp_tune_size){.micro_B = micro_B};
    return BP_OK;
}

/* *index: the setup of N replicas at micro_B, added (not yet measured) if new. */
static bp_status setup_index(tuner *t, int N, int micro_B, int *index, bp_err *err) {
    int size;
    bp_status rc = size_index(t, micro_B, &size, err);
    if (rc) return rc;
    for (*index = 0; *index < t->n_setups; ++*index)
        if (t->setups[*index].N == N && t->setups[*index].size == size) return BP_OK;
    bp_tune_setup *grown = realloc(t->setups, (size_t)(t->n_setups + 1) * sizeof *grown);
    if (!grown) return bp_fail(err, BP_ENOMEM, "out of memory");
    t->setups = grown;
    t->setups[t->n_setups++] = (bp_tune_setup){.N = N, .size = size};
    return BP_OK;
}

static bp_status add_candidate(tuner *t, const bp_tune_candidate *k, bp_err *err) {
    if (!t->c->valid(t->c->ctx, k->avgpipe ? k->N : 0, k->M, &k->sched)) return BP_OK;
    if (t->n_cand == t->cap_cand) {
        int cap = t->cap_cand ? 2 * t->cap_cand : 64;
        bp_tune_candidate *grown = realloc(t->cand, (size_t)cap * sizeof *grown);
        if (!grown) return bp_fail(err, BP_ENOMEM, "out of memory");
        t->cand = grown;
        t->cap_cand = cap;
    }
    t->cand[t->n_cand] = *k;
    return setup_index(t, k->N, t->c->batch / (t->dp * (k->N / k->batches) * k->M),
                       &t->cand[t->n_cand++].setup, err);
}

static bool same_warmups(const tuner *t, const bp_schedule *a, const bp_schedule *b, int V) {
    for (int s = 0; s < t->S; s++)
        if (bp_schedule_warmup(a, t->S, s, V) != bp_schedule_warmup(b, t->S, s, V)) return false;
    return true;
}

/* The advance after K on a stream of V: 1, 2, 4, ... below V, then V (gpipe). */
static int next_advance(int K, int V) { return K * 2 < V ? K * 2 : K < V ? V : V + 1; }

/* 1f1b, afp:K for K = 1, 2, 4, ... below the stream's length V, and gpipe (afp:V);
 * one of each distinct set of warm-ups; or the one given. */
static bp_status add_schedules(tuner *t, bp_tune_candidate *k, bp_err *err) {
    if (t->c->schedule[0]) {
        bp_schedule_parse(t->c->schedule, &k->sched, NULL);
        return add_candidate(t, k, err);
    }
    int V = k->N * k->M * t->c->grad_accum;
    bp_status rc = BP_OK;
    bp_schedule last = {BP_SCHED_1F1B, 0};
    k->sched = last;
    rc = add_candidate(t, k, err);
    for (int K = 1; rc == BP_OK && K <= V; K = next_advance(K, V)) {
        bp_schedule s = K == V ? (bp_schedule){BP_SCHED_GPIPE, 0} : (bp_schedule){BP_SCHED_AFP, K};
        if (same_warmups(t, &s, &last, V)) continue;
        last = k->sched = s;
        rc = add_candidate(t, k, err);
    }
    return rc;
}

/* N: --pipelines, else 1 (a plain pipeline), 2 and 4 (AvgPipe); M: --micro-batches,
 * else every M up to MAX_MICRO whose micro-batch is a whole number of samples. */
static bp_status enumerate(tuner *t, bp_err *err) {
    const bp_tune_problem *tc = t->c;
    int Ns[3] = {1, 2, 4}, n_N = 3;
    bp_status rc = BP_OK;
    if (tc->pipelines > 0) Ns[0] = tc->pipelines, n_N = 1;
    int per_rank = tc->batch / t->dp;
    for (int i = 0; rc == BP_OK && i < n_N; i++)
        for (int M = 1; rc == BP_OK && M <= MAX_MICRO; M++) {
            bool avgpipe = tc->pipelines > 0 || Ns[i] > 1;
            int batches = avgpipe && tc->own_batches ? Ns[i] : 1;
            if ((tc->micro_batches && M != tc->micro_batches) || per_rank % (Ns[i] / batches * M))
                continue;
            bp_tune_candidate k = {.N = Ns[i], .M = M, .avgpipe = avgpipe, .batches = batches};
            rc = add_schedules(t, &k, err);
        }
    if (rc == BP_OK && t->n_cand == 0)
        rc = bp_fail(err, BP_EUSAGE,
                     "no valid (pipelines, micro-batches, schedule): --batch %d must split into "
                     "micro-batches of whole samples over --dp %d",
                     tc->batch, t->dp);
    return rc;
}

/* Less time per batch of --batch samples first (a step with own batches trains on
 * N of them); of equal times (to the microsecond), less memory first. */
int bp_tune_by_rate(const void *a, const void *b) {
    const bp_tune_candidate *x = a, *y = b;
    long long tx = llround(x->r.step_s / x->batches * 1e6),
              ty = llround(y->r.step_s / y->batches * 1e6);
    if (tx != ty) return tx < ty ? -1 : 1;
    return (x->r.peak_bytes > y->r.peak_bytes) - (x->r.peak_bytes < y->r.peak_bytes);
}

void bp_tune_result_free(tuner *t) {
    for (int i = 0; i < t->n_sizes; i++) free(t->sizes[i].first);
    for (int i = 0; i < t->n_setups; i++) {
        free(t->setups[i].stage);
    }
    free(t->sizes);
    free(t->setups);
    free(t->cand);
    *t = (tuner){0};
}

bp_status bp_tune_search(const bp_tune_problem *p, tuner *t, bp_err *err) {
    *t = (tuner){.c = p, .S = p->S, .dp = p->dp, .W = p->dp * p->S};
    t->wake_s = p->wake_ms > 0 ? p->wake_ms * 1e-3 : 0;
    t->T = bp_model_sample_len(&p->model);
    t->n_blocks = bp_model_num_blocks(&p->model);
    double t0 = bp_now();
    bp_status rc = enumerate(t, err);
    if (rc == BP_OK) rc = bp_tune_profile(t, err);
    if (rc == BP_OK) bp_tune_set_link(t);
    for (int i = 0; rc == BP_OK && i < t->n_cand; i++)
        if (bp_tune_predict(t, &t->cand[i]) != BP_OK)
            rc = bp_fail(err, BP_EINTERNAL, "the pipeline simulation of candidate %d stalled", i);
    if (rc == BP_OK) qsort(t->cand, (size_t)t->n_cand, sizeof *t->cand, bp_tune_by_rate);
    t->seconds = bp_now() - t0;
    if (rc) bp_tune_result_free(t);
    return rc;
}
