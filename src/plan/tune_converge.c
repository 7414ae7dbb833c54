/* Convergence for the tuner (plan/tune_search.h): more pipelines N train N replicas
 * on N batches per step and pull them together by elastic averaging, so they take
 * more (or fewer) samples to reach a loss than one pipeline does. The trial's
 * curves give, per N, the samples to the target loss; a candidate's time to it is
 * those samples over its predicted samples per second. */
#include <math.h>
#include <stdlib.h>

#include "plan/tune_impl.h"

double bp_tune_samples_to(const double *samples, const double *loss, int n, double target) {
    for (int i = 0; i < n; i++) {
        if (!(loss[i] <= target)) continue;
        if (i == 0 || !isfinite(loss[i - 1])) return samples[i];
        /* loss[i - 1] > target >= loss[i]: the line between them crosses it once. */
        double f = (loss[i - 1] - target) / (loss[i - 1] - loss[i]);
        return samples[i - 1] + f * (samples[i] - samples[i - 1]);
    }
    return INFINITY;
}

const bp_tune_curve *bp_tune_trial_curve(const bp_tune_trial *tr, const bp_tune_candidate *k) {
    int pipelines = k->avgpipe ? k->N : 0;
    for (int i = 0; i < tr->n; i++)
        if (tr->curve[i].pipelines == pipelines) return &tr->curve[i];
    return NULL;
}

/* Less time to the target first; those that never reach it (or diverged, which
 * are never proposed) after, each group in the order of samples per second. */
static int by_target(const void *a, const void *b) {
    const bp_tune_candidate *x = a, *y = b;
    if (x->diverged != y->diverged) return x->diverged ? 1 : -1;
    if (x->to_target_s != y->to_target_s) return x->to_target_s < y->to_target_s ? -1 : 1;
    return bp_tune_by_rate(a, b);
}

void bp_tune_rank_by_target(bp_tune_result *r, const bp_tune_trial *tr) {
    for (int i = 0; i < r->n_cand; i++) {
        bp_tune_candidate *k = &r->cand[i];
        const bp_tune_curve *c = bp_tune_trial_curve(tr, k);
        k->diverged = !c || c->diverged;
        k->to_target = k->diverged ? INFINITY : c->to_target;
        k->to_target_s = k->to_target / k->samples_per_s;
    }
    qsort(r->cand, (size_t)r->n_cand, sizeof *r->cand, by_target);
}

void bp_tune_trial_free(bp_tune_trial *tr) {
    for (int i = 0; i < tr->n; i++) {
        free(tr->curve[i].samples);
        free(tr->curve[i].loss);
    }
    free(tr->curve);
    *tr = (bp_tune_trial){0};
}
