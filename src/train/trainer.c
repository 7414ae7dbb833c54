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
#include "core/backend_emu.h"
#include "core/blas.h"
#include "core/device.h"
#include "core/log.h"
#include "core/timer.h"
#include "nn/cost.h"
#include "parallel/avgpipe.h"
#include "parallel/dp/easgd.h"
#include "parallel/partition.h"
#include "train/trainer_impl.h"

/* Every rank learns whether a part of set-up failed anywhere, so that no rank goes
 * on into collectives that others never join. */
static bp_status agree(trainer *t, bp_status rc, bp_err *err) {
    return bp_train_agree(t->meta, rc, &t->res->stopped_together, err);
}

/* --comm-poll-us in seconds; emulated, dilated (at most BP_COMM_POLL_HOST_MAX_S:
 * the host's own wake-ups stay prompt). */
static double poll_s(const trainer *t) {
    double s = t->cfg->comm.poll_us * 1e-6;
    return t->dilation > 1 ? fmin(s * t->dilation, BP_COMM_POLL_HOST_MAX_S) : s;
}

void trainer_dp_config(const trainer *t, bp_dp_config *d) {
    const bp_train_config *c = t->cfg;
    bp_occ_config occ;
    bp_model_config mc;
    bp_train_dp_config(c, d);
    d->poll_s = poll_s(t);
    d->dilation = t->dilation;
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
    bp_schedule_parse(t->cfg->pipeline.schedule, &s, NULL);
    bp_schedule_name(&s, sched, sizeof sched);
    bp_config_record r = {
        .model = bp_model_kind_name((bp_model_kind)t->cfg->model),
        .params = bp_model_num_params(bp_stage_model(t->stage, 0)), .world = t->size,
        .dp = t->grid.dp, .pp = t->grid.pp, .partition = t->partition,
        .pipelines = bp_stage_replicas(t->stage),
        .micro_batches = t->cfg->pipeline.micro_batches, .schedule = sched, .batch = t->cfg->batch,
        .grad_accum = t->cfg->grad_accum, .dp_algo = algo,
        .net = t->cfg->comm.net[0] ? t->cfg->comm.net : "off"};
    const bp_device_settings *dv = &t->cfg->device;
    char device[96];
    if (t->dev.emulated) {
        snprintf(device, sizeof device, "emulated %s", dv->sheet->title);
        r.device = device;
        r.dilation = t->dilation;
        if (t->rank == 0)
            bp_log_info("device: emulated %s, dilation %g (%s): durations and the network run "
                        "%g times slower, every time reported is divided by %g; loss and "
                        "accuracy are not computed (absent)",
                        dv->sheet->title, t->dilation,
                        dv->dilation >= 1 ? "--dilation" : "chosen from the configuration",
                        t->dilation, t->dilation);
    }
    bp_metrics_config(&t->metrics, &r);
}

/* Blocks per stage: given, taken from the checkpoint being resumed, or balanced by
 * the time rank 0 measures (and broadcasts, so every rank cuts alike). */
static bp_status choose_partition(trainer *t, const bp_model_config *mc, bp_err *err) {
    int S = t->grid.pp, n = bp_model_num_blocks(mc);
    if (!(t->first = calloc((size_t)S + 1, sizeof *t->first)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    const char *given = t->cfg->pipeline.partition[0] ? t->cfg->pipeline.partition
                        : t->resuming        ? t->resume_from.partition
                                             : NULL;
    if (given && bp_partition_parse(given, n, S, t->first, err))
        return t->cfg->pipeline.partition[0] ? bp_err_context(err, "option --partition")
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
        bp_status rc = bp_profile_blocks(mc, t->micro_B, t->task.T, cost, err);
        if (rc) return rc;
        bp_partition_balance(cost, n, S, t->first);
        for (int s = 0; s <= S; s++) cut[s] = (float)t->first[s];
    }
    bp_status rc = bp_bcast(t->meta, cut, (size_t)S + 1, 0);
    if (rc) return bp_comm_fail(t->meta, rc, err);
    for (int s = 0; s <= S; s++) t->first[s] = (int)cut[s];
    return BP_OK;
}

/* Views of the micro-batches of the steps of one stream into the task's batch slots. */
static bp_status make_micro_views(trainer *t, bp_err *err) {
    t->n_micro = bp_train_replicas(t->cfg) * t->cfg->pipeline.micro_batches * t->cfg->grad_accum;
    size_t n = (size_t)t->n_micro * (size_t)bp_train_stream_steps(t->cfg);
    if (!(t->micro = calloc(n, sizeof *t->micro)))
        return bp_fail(err, BP_ENOMEM, "out of memory");
    return BP_OK;
}

/* Steps logged at once: --log-every, but at least a stream's. */
static int pending_room(const bp_train_config *c) {
    int n = c->log_every < TRAINER_MAX_PENDING ? (int)c->log_every : TRAINER_MAX_PENDING;
    return n > bp_train_stream_steps(c) ? n : bp_train_stream_steps(c);
}

/* Set-up of this rank that talks to nobody, before the partition is known. */
static bp_status setup_data(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_train_lr_schedule(c, &t->lr);
    bp_blas_set_threads(c->threads);
    bp_status rc = bp_blas_select((bp_blas_lib)c->matmul, c->data.cache_dir, "option --matmul", err);
    if (rc) return rc;
    bp_progress_init(&t->progress, t->rank == 0 ? c->progress : BP_PROGRESS_NONE, c->steps,
                     bp_model_kind_facts((bp_model_kind)c->model)->unit);
    rc = trainer_read_resume_manifest(t, err);
    if (rc == BP_OK && !t->probe) rc = trainer_claim_out(t, err);
    if (rc == BP_OK) rc = bp_task_init(&t->task, c, t->grid.d, t->grid.dp, err);
    t->micro_B = bp_train_micro_rows(c, t->grid.dp);
    if (rc == BP_OK) rc = make_micro_views(t, err);
    /* Bounded whatever --steps and --log-every are: the median is over the last
     * TRAINER_MAX_TIMES steps, and pending steps are logged at least that often. */
    size_t times = c->steps < TRAINER_MAX_TIMES ? (size_t)c->steps : TRAINER_MAX_TIMES;
    if (rc == BP_OK && (!(t->step_ms = calloc(times, sizeof(double))) ||
                        !(t->pending = calloc((size_t)pending_room(c), sizeof *t->pending))))
        rc = bp_fail(err, BP_ENOMEM, "out of memory");
    return rc;
}

/* This stage's settings (parallel/stage.h), from the run's options. */
static bp_status stage_config(trainer *t, const bp_model_config *mc, bp_stage_config *sc,
                              bp_err *err) {
    const bp_train_config *c = t->cfg;
    int p = t->grid.p;
    *sc = (bp_stage_config){
        .grid = &t->grid, .meta = t->meta, .model = mc, .block_begin = t->first[p],
        .block_end = t->first[p + 1], .seed = (uint64_t)c->seed, .be = t->dev.be,
        .device_ops = t->dev.model, .bf16 = t->dev.bf16, .replicas = bp_train_replicas(c),
        .micro_batches = c->pipeline.micro_batches * c->grad_accum,
        .stream_len = bp_train_stream_steps(c), .micro_B = t->micro_B, .T = t->task.T,
        .clip = c->clip, .skip_nonfinite = c->skip_nonfinite, .stop = t->stop};
    bp_train_optim_config(c, &sc->optim);
    bp_train_occ_config(c, &sc->occ);
    return bp_schedule_parse(c->pipeline.schedule, &sc->schedule, err);
}

/* This stage's models and pipeline; the checkpoint when resuming. */
static bp_status setup_stage(trainer *t, const bp_model_config *mc, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_stage_config sc;
    bp_partition_format(t->first, t->grid.pp, t->partition, sizeof t->partition);
    bp_status rc = stage_config(t, mc, &sc, err);
    if (rc == BP_OK) rc = bp_stage_create(&sc, &t->stage, err);
    if (rc == BP_OK && t->resuming) rc = trainer_resume(t, err);
    if (rc == BP_OK && t->rank == 0 && !t->probe) rc = bp_mkdir_p(c->out, err);
    if (rc == BP_OK && t->rank == 0 && !t->probe)
        rc = bp_metrics_open(&t->metrics, c->metrics, t->resuming, err);
    return rc;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* --dilation, or the default for this configuration (train/device.h): the median
 * block forward of the model on one micro-batch, the ranks of this job sharing this
 * machine's cores. */
static double emu_dilation(const trainer *t) {
    const bp_train_config *c = t->cfg;
    if (c->device.dilation >= 1) return c->device.dilation;
    bp_model_config mc;
    bp_train_model_config(c, &mc);
    bp_device_rate r;
    bp_err ignored; /* bf16 on a GPU without it fails when the device opens */
    if (bp_device_sheet_rate(c->device.sheet, c->device.dtype == BP_DTYPE_BF16,
                             BP_DEVICE_EFFICIENCY, "", &r, &ignored))
        return 1;
    int dp = c->dp ? c->dp : t->size / (c->pipeline.stages * c->tp);
    int B = bp_train_micro_rows(c, dp > 0 ? dp : 1), T = bp_model_sample_len(&mc);
    int n = bp_model_num_blocks(&mc);
    double s[n];
    for (int b = 0; b < n; b++) s[b] = bp_model_block_s(&r, &mc, c->tp, b, B, T, false);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return bp_train_dilation_default(s[n / 2], t->size, (int)sysconf(_SC_NPROCESSORS_ONLN));
}

/* --net with the dilation: bandwidth / K, latency x K. */
static bp_status dilate_net(trainer *t, bp_err *err) {
    const char *spec = t->cfg->comm.net;
    bp_net n;
    snprintf(t->net, sizeof t->net, "%s", spec);
    if (t->dilation <= 1 || !spec[0]) return BP_OK;
    if (bp_net_parse(spec, &n, err)) return bp_err_context(err, "option --net");
    if (!n.on) return BP_OK;
    int len = snprintf(t->net, sizeof t->net, "lat=%.17gs,eager=%.17g", n.lat_s * t->dilation,
                       n.eager);
    if (n.bw_bps > 0)
        snprintf(t->net + len, sizeof t->net - (size_t)len, ",bw=%.17gbit",
                 n.bw_bps / t->dilation);
    return BP_OK;
}

/* The path and the emulated network (--net) of the training groups, and the network
 * of the bookkeeping group too: its per-step agreement crosses the same links, and
 * a network emulated for some messages only would be a faster one than asked for. */
static bp_status setup_comm(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_status rc = bp_comm_set_path(t->world, (bp_path)c->comm.path);
    if (rc) return bp_comm_fail(t->world, rc, err);
    if ((rc = dilate_net(t, err))) return rc;
    bp_comm *groups[2] = {t->world, t->meta};
    for (int g = 0; g < 2; g++)
        if ((rc = bp_comm_set_net(groups[g], t->net)))
            return bp_fail(err, rc, "option --net: %s", bp_comm_errmsg(groups[g]));
    return BP_OK;
}

/* --bucket-mb auto resumed on the grid that measured it: the size it chose, from
 * the checkpoint, instead of measuring again (the run's config and manifests still
 * say auto). */
static void reuse_bucket_size(trainer *t, bp_dp_config *d) {
    const bp_manifest *mf = &t->resume_from;
    if (!d->bucket_auto || !t->resuming || !(mf->bucket_mb > 0) || mf->dp != t->grid.dp) return;
    d->bucket_auto = false;
    d->bucket_mb = t->bucket_mb_measured = mf->bucket_mb;
    if (t->rank == 0)
        bp_log_info("--bucket-mb auto: %g MB, as measured before checkpoint %s", mf->bucket_mb,
                    t->resume_dir);
}

/* This rank's index among the ranks of its node: its GPU, where each has its own. */
static int node_rank(bp_comm *world) {
    MPI_Comm node;
    int r = 0;
    if (MPI_Comm_split_type(bp_comm_mpi(world), MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) !=
        MPI_SUCCESS)
        return bp_comm_rank(world);
    MPI_Comm_rank(node, &r);
    MPI_Comm_free(&node);
    return r;
}

/* comm/ reaches the backend's memory through these (bp_comm_memory). */
static bool mem_owns(void *ctx, const void *p) {
    const bp_backend *be = ctx;
    return be->owns(be, p);
}
static void mem_to_host(void *ctx, void *host_dst, const void *src, size_t bytes) {
    const bp_backend *be = ctx;
    be->to_host(be, host_dst, src, bytes);
}
static void mem_to_device(void *ctx, void *dst, const void *host_src, size_t bytes) {
    const bp_backend *be = ctx;
    be->to_device(be, dst, host_src, bytes);
}
/* comm/ reports a failure itself, with the size it wanted. */
static void *mem_host_alloc(void *ctx, size_t bytes) {
    const bp_backend *be = ctx;
    void *p = NULL;
    bp_err err;
    return be->host_alloc(be, &p, bytes, "a staging buffer", &err) == BP_OK ? p : NULL;
}
static void mem_host_free(void *ctx, void *p) {
    const bp_backend *be = ctx;
    be->host_free(be, p);
}

static bool progress_world(void *ctx) { return bp_comm_progress(ctx); }

/* An emulated device's waits move the rank's messages on: a wait lasts the dilated
 * device's time, and a send stalled behind it (bp_comm_progress) would be a cost
 * of the emulation, not of the device or the network it emulates. A message over
 * the eager limit takes several hand-overs between the ranks (request, reply,
 * fragments), each waiting for the next poll, hence 8 polls per interval of the
 * groups' (on a 4-stage gpipe, 1 per interval left the step 9% over eager sends,
 * 8 within 3%); only while sends or receives are posted. */
static void hand_progress(const trainer *t) {
    if (!t->dev.emulated) return;
    double s = poll_s(t);
    bp_backend_emu_set_progress(t->dev.be, &(bp_emu_progress){.fn = progress_world,
                                                              .ctx = t->world,
                                                              .every_s = s > 0 ? s / 8 : 1e-4});
}

/* The bookkeeping group beside the world, both watched, and the run's device. */
static bp_status setup_world(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    bp_status rc = bp_comm_wrap(bp_comm_mpi(t->world), "meta", &t->meta, err);
    if (rc) return rc;
    /* Every communication is watched from the first: set-up's and the per-step
     * agreement on meta (a world of its own) as well as the training groups'. */
    bp_comm *groups[2] = {t->world, t->meta};
    for (int g = 0; g < 2; g++)
        if ((rc = bp_comm_set_timeout(groups[g], c->comm.timeout)))
            return bp_comm_fail(groups[g], rc, err);
    /* The training groups are split from the world and learn from it where the
     * backend's buffers live. */
    bp_device_settings ds = c->device;
    if (ds.kind == BP_DEVICE_EMU) ds.dilation = t->dilation = emu_dilation(t);
    rc = bp_train_device_open(&ds, node_rank(t->world), &t->dev, err);
    if ((rc = agree(t, rc, err))) return rc;
    hand_progress(t);
    /* Every wait sleeps between tests, so that a waiting rank leaves its core to the
     * others; the groups split later inherit it. Emulated, the interval is the
     * device's (dilated) as the rest of the run. */
    for (int g = 0; g < 2; g++)
        if ((rc = bp_comm_set_poll(groups[g], poll_s(t))))
            return bp_comm_fail(groups[g], rc, err);
    bp_comm_memory mem = {.ctx = (void *)t->dev.be,
                          .owns = mem_owns,
                          .to_host = mem_to_host,
                          .to_device = mem_to_device,
                          .host_alloc = mem_host_alloc,
                          .host_free = mem_host_free};
    if (!t->dev.be->host_memory && (rc = bp_comm_set_memory(t->world, &mem)))
        return bp_comm_fail(t->world, rc, err);
    return BP_OK;
}

/* This rank's job as the --trace file sees it (formats/trace_file.h). */
static bp_trace_job trace_job(const trainer *t) {
    return (bp_trace_job){.meta = t->meta, .grid = &t->grid, .rank = t->rank, .size = t->size,
                          .path = t->cfg->trace, .dilation = t->dilation};
}

static bp_status setup(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    t->rank = bp_comm_rank(t->world);
    t->size = bp_comm_size(t->world);
    bp_model_config mc;
    bp_train_model_config(c, &mc);
    bp_status rc = setup_world(t, err);
    if (rc) return rc;
    rc = bp_grid_init(t->world, c->dp, c->pipeline.stages, c->tp,
                      bp_model_tied_tensor(&mc) != NULL, c->occ.fused_embedding_sync, &t->grid, err);
    bp_trace_job tj = trace_job(t);
    if (rc == BP_OK)
        rc = agree(t, bp_trace_file_start(&tj, (size_t)c->trace_events, &t->trace, err), err);
    if (rc == BP_OK) rc = agree(t, setup_data(t, err), err);
    if (rc == BP_OK) rc = agree(t, choose_partition(t, &mc, err), err);
    if (rc == BP_OK) rc = agree(t, setup_stage(t, &mc, err), err);
    if (rc == BP_OK) rc = setup_comm(t, err);
    bp_dp_config d;
    trainer_dp_config(t, &d);
    reuse_bucket_size(t, &d);
    if (rc == BP_OK) rc = bp_stage_start(t->stage, &d, t->step, err);
    if (rc == BP_OK) rc = agree(t, trainer_replica_init(t, err), err);
    if (rc == BP_OK) rc = trainer_replica_agree(t, err);
    if (rc == BP_OK) rc = agree(t, trainer_resume_replica(t, err), err);
    if (rc == BP_OK) log_config(t);
    return rc;
}

static void teardown(trainer *t) {
    bp_stage_destroy(t->stage);
    bp_metrics_close(&t->metrics);
    bp_task_free(&t->task);
    bp_grid_free(&t->grid);
    bp_comm_destroy(t->meta);
    bp_trace_destroy(t->trace);
    free(t->first);
    free(t->micro);
    free(t->step_ms);
    free(t->pending);
    const bp_backend *be = t->dev.be;
    if (be) {
        be->free(be, t->avg_params);
        be->free(be, t->avg_m);
        be->free(be, t->avg_v);
        be->free(be, t->eval_saved);
    }
    free(t->host_params);
    free(t->host_m);
    free(t->host_v);
    free(t->host_logits);
    trainer_replica_free(t);
    if (be && !be->host_memory) bp_comm_set_memory(t->world, NULL);
    bp_train_device_close(&t->dev);
    trainer_release_out(t);
}

/* ---- one step ------------------------------------------------------------------- */

static bool fault_here(const trainer *t, int rank) {
    return rank == t->rank && t->cfg->faults.at_step == t->step + 1;
}

/* Testing: this rank disappears (kill -9), stops communicating (hangs), or its
 * weights went non-finite (as a diverged step leaves them). */
static void inject_process_fault(trainer *t) {
    if (fault_here(t, t->cfg->faults.kill_rank)) raise(SIGKILL);
    if (fault_here(t, t->cfg->faults.nan_weights_rank))
        t->dev.be->fill(t->dev.be, bp_model_params(bp_stage_model(t->stage, 0)), 1, NAN);
    if (fault_here(t, t->cfg->faults.hang_rank))
        for (;;) pause();
}

/* Draw the batches of step i of a stream and cut each into the micro-batches of
 * AvgPipe's stream (one pipeline without --pipelines): per accumulation k, one batch
 * split among the N pipelines, or N batches drawn in turn, the j-th pipeline j's own. */
static void next_micro_batches(trainer *t, int i) {
    int M = t->cfg->pipeline.micro_batches, own = bp_train_batches_per_step(t->cfg);
    int N = bp_stage_replicas(t->stage);
    for (int k = 0; k < t->cfg->grad_accum; k++) {
        bp_batch *out = t->micro + (size_t)i * t->n_micro + (size_t)k * M * N;
        for (int j = 0; j < own; j++) {
            bp_batch b;
            bp_task_next(&t->task, i * t->task.slots + k * own + j, &b);
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

/* The records of the k steps of a stream that began at t0, embed_s of it in the
 * tied tensor's sync: its time, bytes and bubbles shared out evenly (its steps
 * overlap), each step's own loss and lr. */
static void fill_records(trainer *t, bp_step_record *r, int k, double t0, double embed_s) {
    bp_pipe_stats ps;
    double tp_s, bytes[BP_AXES];
    bp_stage_stats_take(t->stage, &ps);
    axis_bytes(t, bytes, &tp_s);
    double ms_per_s = 1e3 / t->dilation; /* emulated: reported in the device's time */
    double exposed[BP_AXES] = {
        [BP_AXIS_DP] = bp_dp_exposed_seconds(bp_stage_dp(t->stage)) * ms_per_s,
        [BP_AXIS_PP] = ps.idle_s * ms_per_s, [BP_AXIS_TP] = tp_s * ms_per_s,
        [BP_AXIS_EMBED] = embed_s * ms_per_s};
    double ms = (bp_now() - t0) * ms_per_s / k;
    for (int i = 0; i < k; i++) {
        r[i].step = t->step - k + 1 + i;
        r[i].step_ms = ms;
        r[i].comm_exposed_ms = 0;
        for (int a = 0; a < BP_AXES; a++) {
            r[i].axis_bytes[a] = bytes[a] / k;
            r[i].comm_exposed_ms += r[i].axis_exposed_ms[a] = exposed[a] / k;
        }
        r[i].compute_ms = ms - r[i].comm_exposed_ms;
        r[i].items_per_s = (double)bp_task_items_per_step(&t->task) * t->task.slots / (ms * 1e-3);
    }
}

static int every(int64_t step, int64_t n) { return n > 0 && step % n == 0; }

/* Whether step number n (from 1) leaves out the agreement and the gradient norm,
 * the barrier of every rank (parallel/step.h): replicas that meet only at some
 * steps (AvgPipe's and easgd's averaging, DiLoCo's outer steps) need none in
 * between, unless clipping needs the norm or --skip-nonfinite needs every step's
 * verdict. A step that evaluates or saves agrees first, so that no checkpoint
 * holds a value some rank saw non-finite. A stop request waits for the next
 * agreeing step. */
static bool local_step(const trainer *t, int64_t n) {
    const bp_train_config *c = t->cfg;
    return bp_train_local_step(c, t->size, n) && n != t->end_step && !every(n, c->eval_every) &&
           !every(n, c->checkpoint_every);
}

/* Steps the next stream runs without a flush (--avgpipe-flush): it goes on past
 * step n while n is local and neither evaluates nor saves (there every replica must
 * hold step n's weights), up to the stream's length and to room in the log; a fault
 * injected for testing starts a stream. */
static int stream_length(const trainer *t) {
    const bp_train_config *c = t->cfg;
    int K = bp_train_stream_steps(c), k = 1, room = pending_room(c) - t->n_pending;
    if (K > room) K = room;
    for (int64_t n = t->step + 1; k < K && local_step(t, n) && c->faults.at_step != n + 1; n++)
        k++;
    return k;
}

/* The next k steps' inputs: their micro-batches drawn, their learning rates. */
static void step_inputs(trainer *t, int k, bp_grid_step_in *in, bp_step_record *r) {
    for (int i = 0; i < k; i++) {
        next_micro_batches(t, i);
        r[i].lr = bp_lr_at(&t->lr, t->step + i);
        in[i] = (bp_grid_step_in){.step = t->step + i, .lr = r[i].lr,
                                  .micro = t->micro + (size_t)i * t->n_micro,
                                  .stop_requested = *t->stop != 0,
                                  .poison = i == 0 && fault_here(t, t->cfg->faults.nan_rank),
                                  .local = local_step(t, t->step + i + 1)};
    }
}

/* --bucket-mb auto: the size measured, logged once the engine has chosen it. */
static void note_bucket_choice(trainer *t) {
    bp_dp_tune_result tune;
    if (!bp_dp_bucket_tune_result(bp_stage_dp(t->stage), &tune)) return;
    bp_metrics_bucket_tune(&t->metrics, tune.step, BP_DP_TUNE_SIZES, tune.size_mb, tune.step_ms,
                           tune.chosen_mb);
    t->bucket_mb_measured = tune.chosen_mb;
    if (t->rank == 0)
        bp_log_info("--bucket-mb auto: %g MB, the fastest measured, from step %lld on",
                    tune.chosen_mb, (long long)tune.step + 1);
}

/* --matmul other than openblas: the libraries the first steps' products went to;
 * --dtype bf16 on the CPU: how it rounds. */
static void note_matmul_choice(trainer *t) {
    const bp_train_config *c = t->cfg;
    if (t->matmul_noted || t->rank != 0) return;
    t->matmul_noted = true;
    if (c->device.kind == BP_DEVICE_CPU && c->device.dtype == BP_DTYPE_BF16)
        bp_log_info("--dtype bf16 on the CPU: bf16 activations and weight copies by software "
                    "rounding, %s, fp32 master weights",
                    bp_blas_bf16_native() ? "the linear layers' products on the CPU's bf16 "
                                            "instructions (oneDNN)"
                                          : "products in fp32 (no bf16 instructions found)");
    if (c->matmul == BP_BLAS_OPENBLAS) return;
    char what[128];
    bp_blas_describe(what, sizeof what);
    bp_log_info("matrix products: %s", what);
}

/* The next k steps (one stream of the pipeline); fills their records. A stop
 * request agreed within a long step abandons it: *done is 0, the data drawn for
 * it is put back, and the run stops as after the step before (whose checkpoint
 * is then saved, so that a resumed run goes on exactly). */
static bp_status train_steps(trainer *t, int k, bp_step_record *r, int *done, bp_err *err) {
    inject_process_fault(t);
    double t0 = bp_now();
    bp_trace_set_step(t->trace, t->step + 1);
    bp_grid_step_in in[k];
    bp_grid_step_out out[k];
    bp_resume_state drawn_from = {0};
    bp_task_get_state(&t->task, &drawn_from);
    *done = 0;
    step_inputs(t, k, in, r);
    bp_status rc = bp_stage_steps(t->stage, k, in, out, err);
    if (out[k - 1].together) t->res->stopped_together = true;
    if (rc == BP_EINTERRUPTED) {
        t->stopping = true;
        return bp_task_set_state(&t->task, &drawn_from, err);
    }
    /* The step's time holds its whole update, which the host would otherwise leave
     * running on the device into its logging. */
    if (rc == BP_OK) rc = bp_backend_finish(t->dev.be, err);
    if (rc) return rc;
    *done = k;
    t->stopping = out[k - 1].stop;
    double embed_s = 0;
    for (int i = 0; i < k; i++) embed_s += out[i].embed_s;
    note_bucket_choice(t);
    note_matmul_choice(t);
    if (out[k - 1].skipped && t->rank == 0)
        bp_log_warn("step %lld: non-finite loss or gradient on some rank; step skipped",
                    (long long)t->step + k);
    bp_trace_span(t->trace, "step", "step", t0);
    t->step += k;
    fill_records(t, r, k, t0, embed_s);
    for (int i = 0; i < k; i++) {
        r[i].grad_norm = out[i].grad_norm;
        r[i].loss = out[i].skipped ? NAN : out[i].loss;
        t->res->skipped += out[i].skipped;
    }
    return BP_OK;
}

/* ---- logging -------------------------------------------------------------------- */

/* Log the pending steps with the last stages' losses averaged over the replicas
 * and every rank's bytes added up (one small collective per log interval). */
static bp_status flush_steps(trainer *t, bp_err *err) {
    enum { W = 1 + BP_AXES }; /* per step: loss, bytes of each axis */
    int n = t->n_pending;
    if (n == 0) return BP_OK;
    float v[n * W];
    bool reports = trainer_reports_loss(t);
    for (int i = 0; i < n; i++) {
        v[i * W] = reports ? (float)t->pending[i].loss : 0;
        for (int a = 0; a < BP_AXES; a++) v[i * W + 1 + a] = (float)t->pending[i].axis_bytes[a];
    }
    bp_status rc = t->size > 1 ? bp_allreduce_sum(t->meta, v, (size_t)(n * W)) : BP_OK;
    if (rc) return bp_comm_fail(t->meta, rc, err);
    for (int i = 0; i < n; i++) {
        bp_step_record *r = &t->pending[i];
        r->loss = t->dev.emulated ? NAN : v[i * W] / t->grid.dp; /* not computed */
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

static bp_status stop_now(trainer *t, bp_err *err) {
    t->res->stopped_together = true;
    if (t->rank != 0) {
        bp_err_clear(err);
        return BP_EINTERRUPTED;
    }
    return bp_fail(err, BP_EINTERRUPTED,
                   "stopped by a signal after step %lld; checkpoint %s; continue with --resume %s",
                   (long long)t->step, t->res->checkpoint, t->cfg->out);
}

static bp_status loop(trainer *t, bp_err *err) {
    const bp_train_config *c = t->cfg;
    t->start_time = bp_now();
    if (t->dev.emulated) t->work0_s = bp_backend_emu_work_s(t->dev.be);
    bp_status rc = BP_OK;
    int K = bp_train_stream_steps(c);
    while (rc == BP_OK && t->step < t->end_step) {
        int k = stream_length(t);
        bp_step_record *r = &t->pending[t->n_pending];
        if ((rc = train_steps(t, k, r, &k, err))) break;
        for (int i = 0; i < k; i++)
            t->step_ms[(t->step - k + i - t->first_step) % TRAINER_MAX_TIMES] = r[i].step_ms;
        t->n_pending += k;
        bool last = t->step == t->end_step || t->stopping;
        /* An abandoned step (k = 0) saves at once: the grace period is short. */
        bool eval = k > 0 && !t->dev.emulated &&
                    (every(t->step, c->eval_every) || (c->eval_every > 0 && last));
        bool save = !t->probe && !t->dev.emulated &&
                    (every(t->step, c->checkpoint_every) ||
                     (last && (!c->no_final_checkpoint || t->stopping)));
        bool full = t->n_pending >= c->log_every || t->n_pending + K > pending_room(c);
        if (full || eval || save || last) rc = flush_steps(t, err);
        if (rc == BP_OK && eval) rc = trainer_evaluate(t, err);
        if (rc == BP_OK && save) rc = trainer_checkpoint(t, err);
        if (rc == BP_OK && t->stopping) return stop_now(t, err);
        if (t->probe_done) break;
    }
    return rc;
}

/* ---- summary -------------------------------------------------------------------- */


/* Per stage, from replica 0 (its tp rank 0: the tp ranks of a stage run the same
 * schedule, and adding them up would count each stage tp times): time computing,
 * time idle (bubbles), the most micro-batches stashed at once, their activation
 * memory, and the backward sends (all and compressed) over the run, with the
 * compressed ones' mean relative error: this rank's stage totals ps. */
static bp_status stage_summary(trainer *t, const bp_pipe_stats *ps, bp_err *err) {
    enum { KEYS = BP_STAGE_KEYS };
    int S = t->grid.pp;
    float v[KEYS * S];
    memset(v, 0, sizeof v);
    if (trainer_in_replica0(t) && t->grid.t == 0) {
        int p = t->grid.p;
        v[BP_STAGE_BUSY * S + p] = (float)(ps->busy_s / t->dilation);
        v[BP_STAGE_IDLE * S + p] = (float)(ps->idle_s / t->dilation);
        v[BP_STAGE_PEAK_STASH * S + p] = (float)ps->peak_stash;
        v[BP_STAGE_ACT_BYTES * S + p] = (float)ps->act_bytes;
        v[BP_STAGE_BWD_SENDS * S + p] = (float)ps->cb_sends;
        v[BP_STAGE_BWD_COMPRESSED * S + p] = (float)ps->cb_compressed;
        if (ps->cb_compressed)
            v[BP_STAGE_BWD_REL_ERR * S + p] = (float)(ps->cb_rel_err / (double)ps->cb_compressed);
    }
    bp_status rc = t->size > 1 ? bp_allreduce_sum(t->meta, v, (size_t)(KEYS * S)) : BP_OK;
    if (rc) return bp_comm_fail(t->meta, rc, err);
    bp_metrics_stages(&t->metrics, S, v);
    return BP_OK;
}

static bp_status summary(trainer *t, bp_err *err) {
    int64_t n = t->step - t->first_step;
    if (n > TRAINER_MAX_TIMES) n = TRAINER_MAX_TIMES;
    qsort(t->step_ms, (size_t)n, sizeof(double), cmp_double);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    bp_pipe_stats ps;
    bp_stage_totals(t->stage, &ps);
    uint64_t params = bp_model_num_params(bp_stage_model(t->stage, 0)) * sizeof(bp_real);
    bp_memory_record m = {
        .steps = t->step,
        .median_step_ms = n > 0 ? t->step_ms[n / 2] : NAN,
        .peak_rss_bytes = (uint64_t)ru.ru_maxrss * 1024,
        .param_bytes = params,
        .grad_bytes = params,
        .optim_bytes = params * (uint64_t)bp_optim_num_buffers(&bp_stage_optim(t->stage, 0)->cfg),
        .act_bytes = ps.act_bytes * (uint64_t)ps.peak_stash,
        .device_work_ms = NAN,
    };
    if (t->dev.emulated && t->step > t->first_step) {
        m.device_work_ms = (bp_backend_emu_work_s(t->dev.be) - t->work0_s) * 1e3 /
                           (double)(t->step - t->first_step);
        size_t peak;
        bp_backend_emu_used(t->dev.be, &peak);
        m.device_peak_bytes = peak;
    }
    bp_status rc = stage_summary(t, &ps, err);
    bp_metrics_summary(&t->metrics, &m);
    return rc ? rc : bp_metrics_check(&t->metrics, err);
}

/* A run as t was started: set-up, the steps, the summary. */
static bp_status run(trainer *t, bp_err *err) {
    bp_train_result *res = t->res;
    *res = (bp_train_result){.final_loss = NAN, .val_loss = NAN, .val_acc = NAN};
    bp_status rc = setup(t, err);
    bool set_up = rc == BP_OK;
    if (rc == BP_OK) rc = loop(t, err);
    if (rc == BP_OK) rc = bp_dp_finish(bp_stage_dp(t->stage), err);
    bp_progress_finish(&t->progress);
    if (rc == BP_OK) rc = summary(t, err);
    /* A run refused at set-up (every rank agreeing) trained nothing to trace. */
    bp_trace_job tj = trace_job(t);
    if (set_up) rc = bp_trace_file_write(&tj, t->trace, rc, &res->stopped_together, err);
    res->steps = t->step;
    /* After a failure with several ranks, others may be inside collectives that
     * will never finish: leave everything as it is for the caller to abort the job. */
    if (rc == BP_OK || t->size == 1 || res->stopped_together) teardown(t);
    return rc;
}

bp_status bp_train_run(const bp_train_config *cfg, bp_comm *world,
                       const volatile sig_atomic_t *stop, bp_train_result *res, bp_err *err) {
    trainer t = {.cfg = cfg, .world = world, .res = res, .stop = stop, .out_fd = -1, .dilation = 1,
                 .end_step = cfg->steps};
    return run(&t, err);
}

bp_status bp_train_probe_run(const bp_train_config *cfg, bp_comm *world,
                             const bp_train_probe *probe, bp_train_result *res, bp_err *err) {
    static const volatile sig_atomic_t never = 0;
    if (bp_comm_size(world) != 1 || probe->steps > cfg->steps)
        return bp_fail(err, BP_EINTERNAL, "a probe runs on one rank within --steps");
    trainer t = {.cfg = cfg, .world = world, .res = res, .stop = &never, .out_fd = -1, .dilation = 1,
                 .probe = probe, .end_step = probe->steps};
    return run(&t, err);
}
