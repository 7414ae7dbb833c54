#include "train/trainer.h"

#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bagpipe/comm_mpi.h"
#include "core/blas.h"
#include "core/finite.h"
#include "core/log.h"
#include "core/timer.h"
#include "parallel/dp.h"
#include "train/checkpoint.h"
#include "train/metrics.h"
#include "train/progress.h"
#include "train/task.h"

typedef struct trainer {
    const bp_train_config *cfg;
    bp_comm *world;
    bp_comm *meta; /* bookkeeping (losses, agreement) on its own, never emulated */
    int rank, size;
    bp_model *model;
    bp_acts *acts;
    bp_optim optim;
    bp_dp *dp;
    bp_lr_schedule lr;
    bp_task task;
    bp_metrics metrics;
    bp_progress progress;
    int64_t step, first_step;
    double start_time;
    double *step_ms;          /* per step of this run, for the median */
    bp_step_record *pending;  /* steps not logged yet (losses are averaged over ranks) */
    int n_pending;
    bp_train_result *res;
    const volatile sig_atomic_t *stop;
    bool stopping;           /* every rank agreed to stop after this step */
    float *avg_params, *avg_m, *avg_v; /* replicas averaged for a checkpoint */
} trainer;

static int meta_fail(trainer *t, int rc, bp_err *err) {
    return bp_fail(err, (bp_status)rc, "%s", bp_comm_errmsg(t->meta));
}

/* Every rank learns whether setup failed anywhere, so that no rank goes on into
 * collectives that others never join. */
static int agree(trainer *t, int rc, bp_err *err) {
    float worst = (float)rc;
    int mrc = bp_allreduce_sum(t->meta, &worst, 1);
    if (mrc) return meta_fail(t, mrc, err);
    if (worst != 0) t->res->stopped_together = true;
    if (rc == BP_OK && worst != 0) {
        bp_err_clear(err); /* the rank that failed says why */
        return BP_ECOMM;
    }
    return rc;
}

static int resume(trainer *t, bp_err *err) {
    bp_checkpoint ck;
    int rc = bp_checkpoint_open(t->cfg->resume, 0, 0, &ck, err);
    if (rc) return rc;
    bp_model_config saved;
    rc = bp_checkpoint_model_config(&ck, &saved, err);
    if (rc == BP_OK) rc = bp_train_config_match(bp_model_get_config(t->model), &saved, ck.dir, err);
    if (rc == BP_OK) rc = bp_checkpoint_load_model(&ck, t->model, err);
    if (rc == BP_OK) rc = bp_checkpoint_load_optim(&ck, &t->optim, err);
    if (rc == BP_OK && ck.rs.step > t->cfg->steps)
        rc = bp_fail(err, BP_EUSAGE, "checkpoint %s is at step %lld, beyond --steps %lld", ck.dir,
                     (long long)ck.rs.step, (long long)t->cfg->steps);
    if (rc == BP_OK) {
        bp_task_set_state(&t->task, &ck.rs);
        t->step = t->first_step = ck.rs.step;
        bp_progress_note(&t->progress, "resumed from %s at step %lld (written by %d %s replicas)",
                         ck.dir, (long long)t->step, ck.manifest.dp, ck.manifest.replicas);
    }
    bp_checkpoint_close(&ck);
    return rc;
}

static void log_config(trainer *t) {
    if (!t->metrics.f) return;
    char algo[256];
    bp_dp_config d;
    bp_train_dp_config(t->cfg, &d);
    bp_dp_describe(&d, algo, sizeof algo);
    fprintf(t->metrics.f,
            "{\"type\":\"config\",\"model\":\"%s\",\"params\":%zu,\"world\":%d,\"dp\":%d,"
            "\"batch\":%d,\"grad_accum\":%d,\"dp_algo\":\"%s\",\"net\":\"%s\"}\n",
            t->cfg->model == BP_MODEL_GPT ? "gpt" : "mlp", bp_model_num_params(t->model), t->size,
            t->cfg->dp, t->cfg->batch, t->cfg->grad_accum, algo, t->cfg->net[0] ? t->cfg->net : "off");
    fflush(t->metrics.f);
}

/* Setup on this rank only: nothing here talks to other ranks. */
static int setup_local(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_model_config mc;
    bp_optim_config oc;
    bp_train_model_config(c, &mc);
    bp_train_optim_config(c, &oc);
    bp_train_lr_schedule(c, &t->lr);
    bp_blas_set_threads(c->threads);
    bp_progress_init(&t->progress, t->rank == 0 ? c->progress : BP_PROGRESS_NONE, c->steps,
                     c->model == BP_MODEL_GPT ? "tok" : "samples");
    int rc = bp_task_init(&t->task, c, t->rank, t->size, err);
    if (rc == BP_OK) rc = bp_model_create(&mc, 0, -1, &t->model, err);
    if (rc == BP_OK) bp_model_init_weights(t->model, (uint64_t)c->seed);
    if (rc == BP_OK) rc = bp_optim_init(&t->optim, &oc, bp_model_num_params(t->model), err);
    if (rc == BP_OK) rc = bp_acts_create(t->model, t->task.B_local, t->task.T, &t->acts, err);
    if (rc == BP_OK && (!(t->step_ms = calloc((size_t)c->steps + 1, sizeof(double))) ||
                        !(t->pending = calloc((size_t)c->log_every, sizeof *t->pending))))
        rc = bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc == BP_OK && c->resume[0]) rc = resume(t, err);
    if (rc == BP_OK && t->rank == 0) rc = bp_mkdir_p(c->out, err);
    if (rc == BP_OK && t->rank == 0)
        rc = bp_metrics_open(&t->metrics, c->metrics, c->resume[0] != 0, err);
    return rc;
}

static int setup(trainer *t, bp_err *err) {
    t->rank = bp_comm_rank(t->world);
    t->size = bp_comm_size(t->world);
    int rc = bp_comm_wrap(bp_comm_mpi(t->world), "meta", &t->meta, err);
    if (rc) return rc;
    rc = agree(t, setup_local(t, err), err);
    if (rc == BP_OK && (rc = bp_comm_set_path(t->world, (bp_path)t->cfg->comm_path)))
        rc = bp_fail(err, (bp_status)rc, "%s", bp_comm_errmsg(t->world));
    if (rc == BP_OK && (rc = bp_comm_set_net(t->world, t->cfg->net)))
        rc = bp_fail(err, (bp_status)rc, "option --net: %s", bp_comm_errmsg(t->world));
    if (rc == BP_OK) bp_comm_set_timeout(t->world, t->cfg->comm_timeout);
    bp_dp_config d;
    bp_train_dp_config(t->cfg, &d);
    if (rc == BP_OK) rc = bp_dp_create(t->world, &d, t->model, &t->optim, t->step, &t->dp, err);
    if (rc == BP_OK) log_config(t);
    return rc;
}

static void teardown(trainer *t) {
    bp_dp_destroy(t->dp);
    bp_metrics_close(&t->metrics);
    bp_acts_destroy(t->acts);
    bp_optim_free(&t->optim);
    bp_model_destroy(t->model);
    bp_task_free(&t->task);
    bp_comm_free(t->meta);
    free(t->step_ms);
    free(t->pending);
    free(t->avg_params);
    free(t->avg_m);
    free(t->avg_v);
}

static bool fault_here(const trainer *t, int rank) {
    return rank == t->rank && t->cfg->fault_at_step == t->step + 1;
}

/* Testing: this rank disappears (kill -9) or stops communicating (hangs). */
static void inject_process_fault(trainer *t) {
    if (fault_here(t, t->cfg->fault_kill_rank)) raise(SIGKILL);
    if (fault_here(t, t->cfg->fault_hang_rank))
        for (;;) pause();
}

/* Forward and backward of one micro-batch; the last one is synchronized. */
static int micro_batch(trainer *t, int k, double *loss, bp_err *err) {
    int accum = t->cfg->grad_accum;
    bp_batch b;
    bp_task_next(&t->task, &b);
    int rc = bp_model_forward(t->model, t->acts, &b, NULL, loss, err);
    if (rc) return rc;
    bp_real scale = (bp_real)(1.0 / accum);
    if (fault_here(t, t->cfg->fault_nan_rank)) *loss = scale = NAN;
    if (k == accum - 1) bp_dp_backward_begin(t->dp);
    /* A non-finite loss still runs backward, so that every rank's communication
     * stays in step; the ranks agree on what to do after it (agree_step). */
    return bp_model_backward(t->model, t->acts, &b, NULL, NULL, scale, err);
}

/* The first tensor whose gradient is not finite, or NULL. */
static const char *nonfinite_tensor(trainer *t) {
    int bad = bp_dp_nonfinite_tensor(t->dp);
    const float *g = bp_model_grads(t->model);
    for (int i = 0; bad < 0 && i < bp_model_num_tensors(t->model); i++) {
        const bp_tensor_info *ti = bp_model_tensor(t->model, i);
        if (!bp_all_finite(g + ti->offset, ti->numel)) bad = i;
    }
    return bad < 0 ? NULL : bp_model_tensor(t->model, bad)->name;
}

/* After backward, every rank learns whether any rank saw a non-finite loss or
 * gradient, or was asked to stop, so that all take the same path. */
static int agree_step(trainer *t, double loss, bool *skip, bp_err *err) {
    const char *tensor = nonfinite_tensor(t);
    bool bad = !isfinite(loss) || tensor;
    float flags[2] = {bad ? 1.0f : 0.0f, *t->stop ? 1.0f : 0.0f};
    int rc = t->size > 1 ? bp_allreduce_sum(t->meta, flags, 2) : BP_OK;
    if (rc) return meta_fail(t, rc, err);
    if (flags[1] > 0) t->stopping = true;
    *skip = flags[0] > 0 && t->cfg->skip_nonfinite;
    if (flags[0] == 0 || *skip) return BP_OK;
    t->res->stopped_together = true;
    if (!bad) {
        bp_err_clear(err); /* the rank that saw it says so */
        return BP_ENONFINITE;
    }
    return bp_fail(err, BP_ENONFINITE,
                   "rank %d, step %lld: non-finite %s%s (--skip-nonfinite skips such steps)",
                   t->rank, (long long)t->step + 1, tensor ? "gradient of tensor " : "loss",
                   tensor ? tensor : "");
}

/* One optimizer step on the next batch; fills the record. */
static int train_step(trainer *t, bp_step_record *r, bp_err *err) {
    inject_process_fault(t);
    double t0 = bp_now(), loss_sum = 0;
    bp_model_zero_grad(t->model);
    bp_dp_step_begin(t->dp);
    int rc = BP_OK;
    for (int k = 0; rc == BP_OK && k < t->cfg->grad_accum; k++) {
        double loss;
        rc = micro_batch(t, k, &loss, err);
        loss_sum += loss;
    }
    if (rc == BP_OK) rc = bp_dp_backward_end(t->dp, err);
    bool skip = false;
    if (rc == BP_OK) rc = agree_step(t, loss_sum, &skip, err);
    if (rc) return rc;
    size_t n = bp_model_num_params(t->model);
    r->lr = bp_lr_at(&t->lr, t->step);
    if (skip) {
        r->grad_norm = NAN;
        bp_dp_skip_step(t->dp);
        if (t->rank == 0)
            bp_log_warn("step %lld: non-finite loss or gradient on some rank; step skipped",
                        (long long)t->step + 1);
    } else {
        r->grad_norm = bp_clip_grad_norm(bp_model_grads(t->model), n, t->cfg->clip);
        if ((rc = bp_dp_step(t->dp, r->lr, err))) return rc;
    }
    t->step++;
    bp_stats s;
    bp_comm_stats(t->world, &s, true);
    r->step = t->step;
    r->loss = loss_sum / t->cfg->grad_accum;
    r->step_ms = (bp_now() - t0) * 1e3;
    r->comm_exposed_ms = bp_dp_exposed_seconds(t->dp) * 1e3;
    r->compute_ms = r->step_ms - r->comm_exposed_ms;
    r->bytes_sent = (double)s.total.bytes_sent;
    r->items_per_s = (double)bp_task_items_per_step(&t->task) * t->cfg->grad_accum /
                     (r->step_ms * 1e-3);
    return BP_OK;
}

/* Log the pending steps with their loss averaged over the ranks (one small
 * collective per log interval, not per step). */
static int flush_steps(trainer *t, bp_err *err) {
    if (t->n_pending == 0) return BP_OK;
    float losses[t->n_pending];
    for (int i = 0; i < t->n_pending; i++) losses[i] = (float)t->pending[i].loss;
    int rc = t->size > 1 ? bp_allreduce_avg(t->meta, losses, (size_t)t->n_pending) : BP_OK;
    if (rc) return meta_fail(t, rc, err);
    for (int i = 0; i < t->n_pending; i++) {
        bp_step_record *r = &t->pending[i];
        if (t->size > 1) r->loss = losses[i];
        bp_metrics_step(&t->metrics, r);
    }
    bp_step_record *last = &t->pending[t->n_pending - 1];
    double elapsed = bp_now() - t->start_time, done = (double)(t->step - t->first_step);
    bp_progress_step(&t->progress, t->step, last->loss, last->items_per_s,
                     last->bytes_sent / 1048576.0, elapsed / done * (double)(t->cfg->steps - t->step));
    t->res->final_loss = last->loss;
    t->n_pending = 0;
    return BP_OK;
}

static int evaluate(trainer *t, bp_err *err) {
    double loss, acc;
    if (t->rank != 0) return BP_OK; /* rank 0's replica is evaluated; others go on */
    int rc = bp_task_eval(&t->task, t->model, t->acts, &loss, &acc, err);
    if (rc) return rc;
    bp_metrics_eval(&t->metrics, t->step, loss, acc);
    if (isnan(acc))
        bp_progress_note(&t->progress, "step %lld: validation loss %.4f", (long long)t->step, loss);
    else
        bp_progress_note(&t->progress, "step %lld: test loss %.4f, accuracy %.4f",
                         (long long)t->step, loss, acc);
    t->res->val_loss = loss;
    t->res->val_acc = acc;
    return BP_OK;
}

/* The weights and optimizer state to save: this replica's, or, when replicas
 * differ (weight algorithms), their average over the dp group (collective). */
static int checkpoint_state(trainer *t, const bp_real **params, bp_optim *view, bp_err *err) {
    *params = bp_model_params(t->model);
    *view = t->optim;
    if (!bp_dp_replicas_differ(t->dp)) return BP_OK;
    size_t bytes = bp_model_num_params(t->model) * sizeof(float);
    if (!t->avg_params && (!(t->avg_params = malloc(bytes)) || !(t->avg_m = malloc(bytes)) ||
                           (t->optim.v && !(t->avg_v = malloc(bytes)))))
        return bp_fail(err, BP_ENOMEM, "cannot allocate the averaged checkpoint");
    int rc = bp_dp_average_replicas(t->dp, t->avg_params, t->avg_m, t->avg_v, err);
    *params = t->avg_params;
    view->m = t->avg_m;
    view->v = t->avg_v;
    return rc;
}

static int checkpoint(trainer *t, bp_err *err) {
    const bp_real *params;
    bp_optim view;
    int rc = checkpoint_state(t, &params, &view, err);
    if (rc == BP_OK)
        rc = bp_checkpoint_dir(t->cfg->out, t->step, t->res->checkpoint,
                               sizeof t->res->checkpoint, err);
    if (rc || t->rank != 0) return rc;
    bp_resume_state rs = {.step = t->step};
    bp_task_get_state(&t->task, &rs);
    bp_manifest mf = {.step = t->step, .dp = t->cfg->dp, .pp = 1, .tp = 1};
    bp_dp_config d;
    bp_train_dp_config(t->cfg, &d);
    bp_dp_describe(&d, mf.dp_algo, sizeof mf.dp_algo);
    snprintf(mf.replicas, sizeof mf.replicas, "%s",
             bp_dp_replicas_differ(t->dp) ? "averaged" : "identical");
    const char *dir = t->res->checkpoint;
    rc = bp_checkpoint_write_shard(dir, 0, 0, t->model, params, &view, &rs, err);
    if (rc == BP_OK) rc = bp_manifest_write(dir, &mf, err);
    if (rc == BP_OK) rc = bp_checkpoint_commit(t->cfg->out, t->step, t->cfg->keep_checkpoints, err);
    return rc;
}

static int every(int64_t step, int64_t n) { return n > 0 && step % n == 0; }

static int loop(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    t->start_time = bp_now();
    int rc = BP_OK;
    while (rc == BP_OK && t->step < c->steps) {
        bp_step_record *r = &t->pending[t->n_pending];
        if ((rc = train_step(t, r, err))) break;
        t->step_ms[t->step - t->first_step - 1] = r->step_ms;
        t->n_pending++;
        bool last = t->step == c->steps || t->stopping;
        bool eval = every(t->step, c->eval_every) || (c->eval_every > 0 && last);
        bool save = every(t->step, c->checkpoint_every) || last;
        if (t->n_pending == c->log_every || eval || save) rc = flush_steps(t, err);
        if (rc == BP_OK && eval) rc = evaluate(t, err);
        if (rc == BP_OK && save) rc = checkpoint(t, err);
        if (rc == BP_OK && t->stopping) {
            t->res->stopped_together = true;
            if (t->rank != 0) {
                bp_err_clear(err);
                return BP_EINTERRUPTED;
            }
            return bp_fail(err, BP_EINTERRUPTED,
                           "stopped by a signal after step %lld; checkpoint %s; continue with "
                           "--resume %s",
                           (long long)t->step, t->res->checkpoint, c->out);
        }
    }
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void summary(trainer *t) {
    int64_t n = t->step - t->first_step;
    qsort(t->step_ms, (size_t)n, sizeof(double), cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    uint64_t params = bp_model_num_params(t->model) * sizeof(bp_real);
    bp_memory_record m = {
        .steps = t->step,
        .median_step_ms = n > 0 ? t->step_ms[n / 2] : NAN,
        .peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024,
        .param_bytes = params,
        .grad_bytes = params,
        .optim_bytes = params * (uint64_t)bp_optim_num_buffers(&t->optim.cfg),
        .act_bytes = bp_acts_bytes(t->acts),
    };
    bp_metrics_summary(&t->metrics, &m);
}

int bp_train_run(const bp_train_config *cfg, bp_comm *world, const volatile sig_atomic_t *stop,
                 bp_train_result *res, bp_err *err) {
    trainer t = {.cfg = cfg, .world = world, .res = res, .stop = stop};
    *res = (bp_train_result){.final_loss = NAN, .val_loss = NAN, .val_acc = NAN};
    int rc = setup(&t, err);
    if (rc == BP_OK) rc = loop(&t, err);
    if (rc == BP_OK) rc = bp_dp_finish(t.dp, err);
    bp_progress_finish(&t.progress);
    if (rc == BP_OK) summary(&t);
    res->steps = t.step;
    /* After a failure with several ranks, others may be inside collectives that
     * will never finish: leave everything as it is for the caller to abort the job. */
    if (rc == BP_OK || t.size == 1 || res->stopped_together) teardown(&t);
    return rc;
}
