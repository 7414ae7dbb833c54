/* tune's convergence trial (plan/tune.h): the trainer's own runs, one per N, in
 * this process, and their validation curves. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/timer.h"
#include "train/trainer.h"
#include "plan/tune.h"

static int64_t eval_every(const bp_tune_config *c) {
    return c->trial_steps >= BP_TUNE_TRIAL_POINTS ? c->trial_steps / BP_TUNE_TRIAL_POINTS : 1;
}

static int eval_batches(const bp_tune_config *c) {
    int n = c->train.eval_batches;
    return n < BP_TUNE_TRIAL_EVAL_BATCHES ? n : BP_TUNE_TRIAL_EVAL_BATCHES;
}

/* The run the trial trains with `pipelines`: the tuned run's model, data, batch per
 * pipeline (--avgpipe-batch), seed, optimizer, learning-rate schedule over --steps,
 * clipping and averaging (--ea-alpha, else the default for N; --ea-period), on one
 * rank with one stage and one micro-batch. What only moves data between ranks (the
 * dp algorithm with its one replica, Optimus-CC, the network) has nothing to do. */
static bp_status trial_config(const bp_tune_config *c, int pipelines, bp_train_config *t,
                              bp_err *err) {
    *t = c->train;
    t->dp = t->pipeline.stages = t->tp = 1;
    t->avgpipe.pipelines = pipelines;
    t->pipeline.micro_batches = 1;
    snprintf(t->pipeline.schedule, sizeof t->pipeline.schedule, "1f1b");
    t->pipeline.partition[0] = t->comm.net[0] = t->trace[0] = t->resume[0] = t->metrics[0] = '\0';
    t->dp_algo = BP_DP_ALLREDUCE;
    t->comm.hierarchical = t->occ.cb = t->occ.cb_epilogue_only = t->occ.no_lep = false;
    t->occ.cb_warmup = 0;
    t->occ.sc_stages = 0;
    t->occ.fused_embedding_sync = false;
    t->comm.bucket_mb = BP_DP_BUCKET_MB;
    t->progress = BP_PROGRESS_NONE;
    t->eval_every = eval_every(c);
    t->eval_batches = eval_batches(c);
    bp_fault_settings *f = &t->faults;
    f->kill_rank = f->hang_rank = f->nan_rank = f->nan_weights_rank = -1;
    bp_status rc = bp_train_config_check_world(t, 1, err);
    if (rc && pipelines < 1) return bp_err_context(err, "the convergence trial of one plain pipeline");
    return rc ? bp_err_context(err, "the convergence trial with --pipelines %d", pipelines) : BP_OK;
}

/* Where on_eval records a run's evaluations. */
typedef struct recorder {
    bp_tune_curve *curve;
    double samples_per_step; /* of all replicas together */
    double target;           /* stop once reached; NAN: run every step */
} recorder;

static bool on_eval(void *ctx, int64_t step, double loss) {
    recorder *r = ctx;
    bp_tune_curve *c = r->curve;
    if (c->n == c->cap) return false; /* cannot happen: cap counts every evaluation */
    c->samples[c->n] = (double)step * r->samples_per_step;
    c->loss[c->n++] = loss;
    return !(loss <= r->target);
}

/* One trial run into *curve. */
static bp_status run_curve(const bp_tune_config *c, bp_comm *world, int pipelines, double target,
                           bp_tune_curve *curve, bp_err *err) {
    bp_train_config tc;
    *curve = (bp_tune_curve){.pipelines = pipelines, .to_target = INFINITY};
    bp_status rc = trial_config(c, pipelines, &tc, err);
    if (rc) return rc;
    curve->cap = (int)(c->trial_steps / tc.eval_every) + 1;
    curve->samples = calloc((size_t)curve->cap, sizeof(double));
    curve->loss = calloc((size_t)curve->cap, sizeof(double));
    if (!curve->samples || !curve->loss) return bp_fail(err, BP_ENOMEM, "out of memory");
    recorder r = {curve, (double)tc.batch * tc.grad_accum * bp_train_batches_per_step(&tc),
                  target};
    bp_train_probe probe = {.steps = c->trial_steps, .on_eval = on_eval, .ctx = &r};
    bp_train_result res;
    double t0 = bp_now();
    rc = bp_train_probe_run(&tc, world, &probe, &res, err);
    curve->seconds = bp_now() - t0;
    curve->steps = res.steps;
    if (rc == BP_ENONFINITE) { /* the run would stop the same way */
        curve->diverged = true;
        bp_err_clear(err);
        return BP_OK;
    }
    if (rc && pipelines < 1) return bp_err_context(err, "the convergence trial of one plain pipeline");
    return rc ? bp_err_context(err, "the convergence trial with --pipelines %d", pipelines) : BP_OK;
}

/* The --pipelines values to try: 0 (the plain pipeline, the reference) first, then
 * each other one among the candidates once, ascending. */
static int trial_pipelines(const bp_tune_result *r, int *out) {
    int n = 0;
    out[n++] = 0;
    for (int i = 0; i < r->n_cand; i++) {
        int p = r->cand[i].avgpipe ? r->cand[i].N : 0, at = n;
        for (int j = 0; j < n; j++) at = out[j] == p ? -1 : at;
        for (; at > 1 && out[at - 1] > p; at--) out[at] = out[at - 1];
        if (at < 0) continue;
        out[at] = p;
        n++;
    }
    return n;
}

bp_status bp_tune_trial_run(const bp_tune_config *c, bp_comm *world, const bp_tune_result *r,
                            bp_tune_trial *tr, bp_err *err) {
    int wanted[r->n_cand + 1], n = trial_pipelines(r, wanted);
    bp_status rc = BP_OK;
    *tr = (bp_tune_trial){.steps = c->trial_steps, .eval_every = eval_every(c),
                          .eval_batches = eval_batches(c), .target = NAN};
    if (!(tr->curve = calloc((size_t)n, sizeof *tr->curve)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    double t0 = bp_now();
    for (int i = 0; rc == BP_OK && i < n; i++) {
        bp_tune_curve *cv = &tr->curve[tr->n++];
        rc = run_curve(c, world, wanted[i], tr->target, cv, err);
        if (rc == BP_OK && i == 0 && (cv->diverged || cv->n == 0))
            rc = bp_fail(err, BP_EUSAGE,
                         "option --trial-steps: one pipeline's loss went non-finite within %lld "
                         "steps (the run would diverge: check --lr)",
                         (long long)c->trial_steps);
        if (rc == BP_OK && i == 0) tr->target = cv->loss[cv->n - 1];
    }
    for (int i = 0; rc == BP_OK && i < tr->n; i++) {
        bp_tune_curve *cv = &tr->curve[i];
        if (!cv->diverged)
            cv->to_target = bp_tune_samples_to(cv->samples, cv->loss, cv->n, tr->target);
    }
    tr->seconds = bp_now() - t0;
    if (rc) bp_tune_trial_free(tr);
    return rc;
}
