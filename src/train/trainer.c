/* The training loop on a grid of ranks: set-up, the loop over steps (each one
 * bp_grid_step of parallel/step.h), its cadence of logging, evaluation and
 * checkpoints, and the final summary. */
#include "train/trainer.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "bagpipe/comm_mpi.h"
#include "core/blas.h"
#include "core/log.h"
#include "core/timer.h"
#include "parallel/avgpipe.h"
#include "parallel/partition.h"
#include "train/trainer_impl.h"

/* Every rank learns whether a part of set-up failed anywhere, so that no rank goes
 * on into collectives that others never join. */
static int agree(trainer *t, int rc, bp_err *err) {
    return bp_train_agree(t->meta, rc, &t->res->stopped_together, err);
}

void trainer_dp_config(const trainer *t, bp_dp_config *d) {
    const bp_train_config *c = t->cfg;
    bp_occ_config occ;
    bp_model_config mc;
    bp_train_dp_config(c, d);
    bp_train_occ_config(c, &occ);
    bp_train_model_config(c, &mc);
    bp_occ_dp_config(&occ, t->grid.p, t->grid.pp, bp_model_tied_tensor(&mc), d);
}

static void log_config(trainer *t) {
    char algo[256], sched[32];
    bp_dp_config d;
    trainer_dp_config(t, &d);
    bp_dp_describe(&d, algo, sizeof algo);
    bp_schedule s;
    bp_schedule_parse(t->cfg->schedule, &s, NULL);
    bp_schedule_name(&s, sched, sizeof sched);
    bp_config_record r = {
        .model = t->cfg->model == BP_MODEL_GPT ? "gpt" : "mlp",
        .params = bp_model_num_params(t->model), .world = t->size, .dp = t->grid.dp,
        .pp = t->grid.pp, .partition = t->partition, .pipelines = t->n_rep,
        .micro_batches = t->cfg->micro_batches, .schedule = sched, .batch = t->cfg->batch,
        .grad_accum = t->cfg->grad_accum, .dp_algo = algo,
        .net = t->cfg->net[0] ? t->cfg->net : "off"};
    bp_metrics_config(&t->metrics, &r);
}

/* Blocks per stage: given, taken from the checkpoint being resumed, or balanced by
 * the time rank 0 measures (and broadcasts, so every rank cuts alike). */
static int choose_partition(trainer *t, const bp_model_config *mc, bp_err *err) {
    int S = t->grid.pp, n = bp_model_num_blocks(mc);
    if (!(t->first = calloc((size_t)S + 1, sizeof *t->first)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    const char *given = t->cfg->partition[0] ? t->cfg->partition
                        : t->resuming        ? t->resume_from.partition
                                             : NULL;
    if (given && bp_partition_parse(given, n, S, t->first, err))
        return t->cfg->partition[0] ? bp_err_context(err, "option --partition")
                                    : bp_err_context(err, "checkpoint %s: its manifest's partition",
                                                     t->cfg->resume);
    if (given) return BP_OK;
    if (S == 1) {
        t->first[1] = n;
        return BP_OK;
    }
    float cut[S + 1];
    if (t->rank == 0) {
        double cost[n];
        int rc = bp_profile_blocks(mc, t->micro_B, t->task.T, cost, err);
        if (rc) return rc;
        bp_partition_balance(cost, n, S, t->first);
        for (int s = 0; s <= S; s++) cut[s] = (float)t->first[s];
    }
    int rc = bp_bcast(t->meta, cut, (size_t)S + 1, 0);
    if (rc) return bp_comm_fail(t->meta, rc, err);
    for (int s = 0; s <= S; s++) t->first[s] = (int)cut[s];
    return BP_OK;
}

/* Views of the micro-batches of one step into the task's batch slots. */
static int make_micro_views(trainer *t, bp_err *err) {
    t->n_micro = t->n_rep * t->cfg->micro_batches * t->cfg->grad_accum;
    if (!(t->micro = calloc((size_t)t->n_micro, sizeof *t->micro)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    return BP_OK;
}

/* Set-up of this rank that talks to nobody, before the partition is known. */
static int setup_data(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_train_lr_schedule(c, &t->lr);
    bp_blas_set_threads(c->threads);
    bp_progress_init(&t->progress, t->rank == 0 ? c->progress : BP_PROGRESS_NONE, c->steps,
                     c->model == BP_MODEL_GPT ? "tok" : "samples");
    int rc = trainer_read_resume_manifest(t, err);
    if (rc == BP_OK) rc = trainer_claim_out(t, err);
    if (rc == BP_OK) rc = bp_task_init(&t->task, c, t->grid.d, t->grid.dp, err);
    t->n_rep = c->pipelines > 0 ? c->pipelines : 1;
    t->micro_B = bp_train_micro_rows(c, t->grid.dp);
    if (rc == BP_OK) rc = make_micro_views(t, err);
    /* Bounded whatever --steps and --log-every are: the median is over the last
     * TRAINER_MAX_TIMES steps, and pending steps are logged at least that often. */
    size_t times = c->steps < TRAINER_MAX_TIMES ? (size_t)c->steps : TRAINER_MAX_TIMES;
    size_t pending = c->log_every < TRAINER_MAX_PENDING ? (size_t)c->log_every : TRAINER_MAX_PENDING;
    if (rc == BP_OK && (!(t->step_ms = calloc(times, sizeof(double))) ||
                        !(t->pending = calloc(pending, sizeof *t->pending))))
        rc = bp_fail(err, BP_ENOMEM, "out of memory");
    return rc;
}

/* The models' tensor-parallel sums go over this stage's tp group. */
static int tp_allreduce(void *ctx, bp_real *x, size_t n) {
    bp_comm *tp = ctx;
    return bp_allreduce_sum(tp, x, n);
}

/* This stage's blocks and optimizer, once per replica (AvgPipe runs several). */
static int create_replicas(trainer *t, const bp_model_config *mc, bp_err *err) {
    bp_optim_config oc;
    bp_train_optim_config(t->cfg, &oc);
    int p = t->grid.p;
    int rc = bp_avgpipe_replicas_create(mc, t->first[p], t->first[p + 1], &t->tp,
                                        (uint64_t)t->cfg->seed, &oc, t->n_rep, &t->models,
                                        &t->optims, err);
    if (rc) return rc;
    t->model = t->models[0];
    t->optim = &t->optims[0];
    return rc;
}

/* This stage's replicas and pipeline; the checkpoint when resuming. */
static int setup_stage(trainer *t, const bp_model_config *mc, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_schedule sched;
    bp_partition_format(t->first, t->grid.pp, t->partition, sizeof t->partition);
    int rc = create_replicas(t, mc, err);
    if (rc == BP_OK) rc = bp_schedule_parse(c->schedule, &sched, err);
    bp_occ_config occ;
    bp_train_occ_config(c, &occ);
    if (rc == BP_OK)
        rc = bp_pipe_create(t->grid.pp_comm, t->models, t->n_rep, &sched, t->n_micro / t->n_rep,
                            t->micro_B, t->task.T, &occ, &t->pipe, err);
    if (rc == BP_OK && t->resuming) rc = trainer_resume(t, err);
    if (rc == BP_OK && t->rank == 0) rc = bp_mkdir_p(c->out, err);
    if (rc == BP_OK && t->rank == 0)
        rc = bp_metrics_open(&t->metrics, c->metrics, t->resuming, err);
    return rc;
}

static int setup_comm(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    int rc = bp_comm_set_path(t->world, (bp_path)c->comm_path);
    if (rc == BP_OK && (rc = bp_comm_set_net(t->world, c->net)))
        return bp_fail(err, (bp_status)rc, "option --net: %s", bp_comm_errmsg(t->world));
    return bp_comm_fail(t->world, rc, err);
}

static int setup(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    t->rank = bp_comm_rank(t->world);
    t->size = bp_comm_size(t->world);
    bp_model_config mc;
    bp_train_model_config(c, &mc);
    int rc = bp_comm_wrap(bp_comm_mpi(t->world), "meta", &t->meta, err);
    if (rc) return rc;
    /* Every communication is watched from the first: set-up's and the per-step
     * agreement on meta (a world of its own) as well as the training groups'. */
    bp_comm *groups[2] = {t->world, t->meta};
    for (int g = 0; g < 2; g++)
        if ((rc = bp_comm_set_timeout(groups[g], c->comm_timeout)))
            return bp_comm_fail(groups[g], rc, err);
    rc = bp_grid_init(t->world, c->dp, c->pp, c->tp, bp_model_tied_tensor(&mc) != NULL,
                      c->fused_embedding_sync != 0, &t->grid, err);
    t->tp = (bp_tp){.rank = t->grid.t, .size = t->grid.tp, .allreduce_sum = tp_allreduce,
                    .ctx = t->grid.tp_comm};
    if (rc == BP_OK) rc = agree(t, trainer_trace_start(t, err), err);
    if (rc == BP_OK) rc = agree(t, setup_data(t, err), err);
    if (rc == BP_OK) rc = agree(t, choose_partition(t, &mc, err), err);
    if (rc == BP_OK) rc = agree(t, setup_stage(t, &mc, err), err);
    if (rc == BP_OK) rc = setup_comm(t, err);
    bp_dp_config d;
    trainer_dp_config(t, &d);
    if (rc == BP_OK)
        rc =
            bp_dp_create(t->grid.dp_comm, &d, t->models, t->optims, t->n_rep, t->step, &t->dp, err);
    t->stepper = (bp_grid_step_ctx){
        .grid = &t->grid, .meta = t->meta, .models = t->models, .n_replicas = t->n_rep,
        .pipe = t->pipe, .dp = t->dp, .tied = bp_model_tied_tensor(&mc),
        .fused_embedding = c->fused_embedding_sync != 0, .clip = c->clip,
        .skip_nonfinite = c->skip_nonfinite != 0, .pending = &t->unagreed};
    if (rc == BP_OK) log_config(t);
    return rc;
}

static void teardown(trainer *t) {
    bp_dp_destroy(t->dp);
    bp_pipe_destroy(t->pipe);
    bp_metrics_close(&t->metrics);
    if (t->models) bp_avgpipe_replicas_destroy(t->models, t->optims, t->n_rep);
    bp_task_free(&t->task);
    bp_grid_free(&t->grid);
    bp_comm_destroy(t->meta);
    bp_trace_destroy(t->trace);
    free(t->first);
    free(t->micro);
    free(t->step_ms);
    free(t->pending);
    free(t->avg_params);
    free(t->avg_m);
    free(t->avg_v);
    free(t->eval_saved);
    trainer_release_out(t);
}

/* ---- one step ------------------------------------------------------------------- */

static bool fault_here(const trainer *t, int rank) {
    return rank == t->rank && t->cfg->fault_at_step == t->step + 1;
}

/* Testing: this rank disappears (kill -9), stops communicating (hangs), or its
 * weights went non-finite (as a diverged step leaves them). */
static void inject_process_fault(trainer *t) {
    if (fault_here(t, t->cfg->fault_kill_rank)) raise(SIGKILL);
    if (fault_here(t, t->cfg->fault_nan_weights_rank)) bp_model_params(t->model)[0] = NAN;
    if (fault_here(t, t->cfg->fault_hang_rank))
        for (;;) pause();
}

/* Draw this step's batches and cut each into the micro-batches of AvgPipe's
 * stream (one pipeline without --pipelines): per accumulation k, one batch split
 * among the N pipelines, or N batches drawn in turn, the j-th pipeline j's own. */
static void next_micro_batches(trainer *t) {
    int M = t->cfg->micro_batches, N = t->n_rep, own = bp_train_batches_per_step(t->cfg);
    for (int k = 0; k < t->cfg->grad_accum; k++) {
        bp_batch *out = t->micro + (size_t)k * M * N;
        for (int j = 0; j < own; j++) {
            bp_batch b;
            bp_task_next(&t->task, k * own + j, &b);
            bp_avgpipe_split(&b, own > 1 ? j : 0, own > 1 ? 1 : N, N, M, t->micro_B,
                             (size_t)t->task.width, out);
        }
    }
}

/* Bytes this rank sent on each axis's group in this step (counters reset). */
static void axis_bytes(trainer *t, double *bytes, double *tp_blocked_s) {
    bp_comm *groups[BP_AXES] = {t->grid.dp_comm, t->grid.pp_comm, t->grid.tp_comm,
                                t->grid.embed_comm};
    *tp_blocked_s = 0;
    for (int a = 0; a < BP_AXES; a++) {
        bp_stats s = {0};
        if (groups[a]) bp_comm_stats(groups[a], &s, true);
        bytes[a] = (double)s.total.bytes_sent;
        if (a == BP_AXIS_TP) *tp_blocked_s = s.total.blocked_s;
    }
}

static void fill_record(trainer *t, bp_step_record *r, double t0, double loss) {
    bp_pipe_stats ps;
    double tp_s;
    bp_pipe_stats_take(t->pipe, &ps);
    t->busy_s += ps.busy_s;
    t->idle_s += ps.idle_s;
    t->cb_sends += ps.cb_sends;
    t->cb_compressed += ps.cb_compressed;
    t->cb_rel_err += ps.cb_rel_err;
    axis_bytes(t, r->axis_bytes, &tp_s);
    r->axis_exposed_ms[BP_AXIS_DP] = bp_dp_exposed_seconds(t->dp) * 1e3;
    r->axis_exposed_ms[BP_AXIS_PP] = ps.idle_s * 1e3;
    r->axis_exposed_ms[BP_AXIS_TP] = tp_s * 1e3;
    r->axis_exposed_ms[BP_AXIS_EMBED] = t->embed_s * 1e3;
    r->step = t->step;
    r->loss = loss;
    r->step_ms = (bp_now() - t0) * 1e3;
    r->comm_exposed_ms = 0;
    for (int a = 0; a < BP_AXES; a++) r->comm_exposed_ms += r->axis_exposed_ms[a];
    r->compute_ms = r->step_ms - r->comm_exposed_ms;
    r->items_per_s = (double)bp_task_items_per_step(&t->task) * t->task.slots /
                     (r->step_ms * 1e-3);
}

/* Whether this step leaves out the agreement and the gradient norm, the barrier of
 * every stage (parallel/step.h): AvgPipe's replicas meet only at the elastic
 * averaging every tau steps, so the steps in between need no barrier, unless
 * clipping needs the norm or --skip-nonfinite needs every step's verdict. A stop
 * request waits for the next averaging step or the last step. */
static bool local_step(const trainer *t) {
    const bp_train_config *c = t->cfg;
    int64_t next = t->step + 1;
    return bp_train_local_steps(c, t->size) && next % c->ea_period != 0 && next != c->steps;
}

/* One optimizer step on the next batch; fills the record. */
static int train_step(trainer *t, bp_step_record *r, bp_err *err) {
    inject_process_fault(t);
    double t0 = bp_now();
    bp_trace_set_step(t->trace, t->step + 1);
    next_micro_batches(t);
    r->lr = bp_lr_at(&t->lr, t->step);
    bp_grid_step_in in = {.step = t->step, .lr = r->lr, .micro = t->micro,
                          .stop_requested = *t->stop != 0,
                          .poison = fault_here(t, t->cfg->fault_nan_rank),
                          .local = local_step(t)};
    bp_grid_step_out out;
    int rc = bp_grid_step(&t->stepper, &in, &out, err);
    if (out.together) t->res->stopped_together = true;
    if (rc) return rc;
    t->stopping = out.stop;
    t->embed_s = out.embed_s;
    bp_dp_tune_result tune;
    if (bp_dp_bucket_tune_result(t->dp, &tune)) {
        bp_metrics_bucket_tune(&t->metrics, tune.step, BP_DP_TUNE_SIZES, tune.size_mb,
                               tune.step_ms, tune.chosen_mb);
        if (t->rank == 0)
            bp_log_info("--bucket-mb auto: %g MB, the fastest measured, from step %lld on",
                        tune.chosen_mb, (long long)tune.step + 1);
    }
    r->grad_norm = out.grad_norm;
    if (out.skipped && t->rank == 0)
        bp_log_warn("step %lld: non-finite loss or gradient on some rank; step skipped",
                    (long long)t->step + 1);
    bp_trace_span(t->trace, "step", "step", t0);
    t->step++;
    fill_record(t, r, t0, out.skipped ? NAN : out.loss);
    return BP_OK;
}

/* ---- logging -------------------------------------------------------------------- */

/* Log the pending steps with the last stages' losses averaged over the replicas
 * and every rank's bytes added up (one small collective per log interval). */
static int flush_steps(trainer *t, bp_err *err) {
    enum { W = 1 + BP_AXES }; /* per step: loss, bytes of each axis */
    int n = t->n_pending;
    if (n == 0) return BP_OK;
    float v[n * W];
    bool reports = trainer_reports_loss(t);
    for (int i = 0; i < n; i++) {
        v[i * W] = reports ? (float)t->pending[i].loss : 0;
        for (int a = 0; a < BP_AXES; a++) v[i * W + 1 + a] = (float)t->pending[i].axis_bytes[a];
    }
    int rc = t->size > 1 ? bp_allreduce_sum(t->meta, v, (size_t)(n * W)) : BP_OK;
    if (rc) return bp_comm_fail(t->meta, rc, err);
    for (int i = 0; i < n; i++) {
        bp_step_record *r = &t->pending[i];
        r->loss = v[i * W] / t->grid.dp;
        r->bytes_sent = 0;
        for (int a = 0; a < BP_AXES; a++) r->bytes_sent += r->axis_bytes[a] = v[i * W + 1 + a];
        bp_metrics_step(&t->metrics, r);
    }
    if ((rc = bp_metrics_check(&t->metrics, err))) return rc;
    bp_step_record *last = &t->pending[n - 1];
    double elapsed = bp_now() - t->start_time, done = (double)(t->step - t->first_step);
    bp_progress_step(&t->progress, t->step, last->loss, last->items_per_s,
                     last->bytes_sent / 1048576.0, elapsed / done * (double)(t->cfg->steps - t->step));
    t->res->final_loss = last->loss;
    t->n_pending = 0;
    return BP_OK;
}

static int every(int64_t step, int64_t n) { return n > 0 && step % n == 0; }

static int stop_now(trainer *t, bp_err *err) {
    t->res->stopped_together = true;
    if (t->rank != 0) {
        bp_err_clear(err);
        return BP_EINTERRUPTED;
    }
    return bp_fail(err, BP_EINTERRUPTED,
                   "stopped by a signal after step %lld; checkpoint %s; continue with --resume %s",
                   (long long)t->step, t->res->checkpoint, t->cfg->out);
}

static int loop(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    t->start_time = bp_now();
    int rc = BP_OK;
    while (rc == BP_OK && t->step < c->steps) {
        bp_step_record *r = &t->pending[t->n_pending];
        if ((rc = train_step(t, r, err))) break;
        t->step_ms[(t->step - t->first_step - 1) % TRAINER_MAX_TIMES] = r->step_ms;
        t->n_pending++;
        bool last = t->step == c->steps || t->stopping;
        bool eval = every(t->step, c->eval_every) || (c->eval_every > 0 && last);
        bool save = every(t->step, c->checkpoint_every) || last;
        bool full = t->n_pending == c->log_every || t->n_pending == TRAINER_MAX_PENDING;
        if (full || eval || save) rc = flush_steps(t, err);
        if (rc == BP_OK && eval) rc = trainer_evaluate(t, err);
        if (rc == BP_OK && save) rc = trainer_checkpoint(t, err);
        if (rc == BP_OK && t->stopping) return stop_now(t, err);
    }
    return rc;
}

/* ---- summary -------------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Per stage, from replica 0 (its tp rank 0: the tp ranks of a stage run the same
 * schedule, and adding them up would count each stage tp times): time computing,
 * time idle (bubbles), the most micro-batches stashed at once, their activation
 * memory, and the backward sends (all and compressed) over the run, with the
 * compressed ones' mean relative error. */
static int stage_summary(trainer *t, bp_err *err) {
    enum { KEYS = BP_STAGE_KEYS };
    int S = t->grid.pp;
    float v[KEYS * S];
    memset(v, 0, sizeof v);
    bp_pipe_stats ps;
    bp_pipe_stats_take(t->pipe, &ps);
    if (trainer_in_replica0(t) && t->grid.t == 0) {
        int p = t->grid.p;
        v[BP_STAGE_BUSY * S + p] = (float)t->busy_s;
        v[BP_STAGE_IDLE * S + p] = (float)t->idle_s;
        v[BP_STAGE_PEAK_STASH * S + p] = (float)ps.peak_stash;
        v[BP_STAGE_ACT_BYTES * S + p] = (float)ps.act_bytes;
        v[BP_STAGE_BWD_SENDS * S + p] = (float)t->cb_sends;
        v[BP_STAGE_BWD_COMPRESSED * S + p] = (float)t->cb_compressed;
        if (t->cb_compressed)
            v[BP_STAGE_BWD_REL_ERR * S + p] = (float)(t->cb_rel_err / (double)t->cb_compressed);
    }
    int rc = t->size > 1 ? bp_allreduce_sum(t->meta, v, (size_t)(KEYS * S)) : BP_OK;
    if (rc) return bp_comm_fail(t->meta, rc, err);
    bp_metrics_stages(&t->metrics, S, v);
    return BP_OK;
}

static int summary(trainer *t, bp_err *err) {
    int64_t n = t->step - t->first_step;
    if (n > TRAINER_MAX_TIMES) n = TRAINER_MAX_TIMES;
    qsort(t->step_ms, (size_t)n, sizeof(double), cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    bp_pipe_stats ps;
    bp_pipe_stats_take(t->pipe, &ps);
    uint64_t params = bp_model_num_params(t->model) * sizeof(bp_real);
    bp_memory_record m = {
        .steps = t->step,
        .median_step_ms = n > 0 ? t->step_ms[n / 2] : NAN,
        .peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024,
        .param_bytes = params,
        .grad_bytes = params,
        .optim_bytes = params * (uint64_t)bp_optim_num_buffers(&t->optim->cfg),
        .act_bytes = ps.act_bytes * (uint64_t)ps.peak_stash,
    };
    int rc = stage_summary(t, err);
    bp_metrics_summary(&t->metrics, &m);
    return rc ? rc : bp_metrics_check(&t->metrics, err);
}

bp_status bp_train_run(const bp_train_config *cfg, bp_comm *world,
                       const volatile sig_atomic_t *stop, bp_train_result *res, bp_err *err) {
    trainer t = {.cfg = cfg, .world = world, .res = res, .stop = stop, .out_fd = -1};
    *res = (bp_train_result){.final_loss = NAN, .val_loss = NAN, .val_acc = NAN};
    int rc = setup(&t, err);
    if (rc == BP_OK) rc = loop(&t, err);
    if (rc == BP_OK) rc = bp_dp_finish(t.dp, err);
    bp_progress_finish(&t.progress);
    if (rc == BP_OK) rc = summary(&t, err);
    rc = trainer_trace_write(&t, rc, err);
    res->steps = t.step;
    /* After a failure with several ranks, others may be inside collectives that
     * will never finish: leave everything as it is for the caller to abort the job. */
    if (rc == BP_OK || t.size == 1 || res->stopped_together) teardown(&t);
    return rc;
}
