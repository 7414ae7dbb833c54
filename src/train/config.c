#include "train/config.h"

#include <assert.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "core/blas.h"
#include "core/device.h"
#include "parallel/dp/algo.h"
#include "parallel/dp/easgd.h"

#define OFF(f) offsetof(bp_train_config, f)
#define NUM(...) BP_OPT_NUM(bp_train_config, __VA_ARGS__)
#define STR(...) BP_OPT_STR(bp_train_config, __VA_ARGS__)
#define CHOICE(...) BP_OPT_CHOOSE(bp_train_config, __VA_ARGS__)
#define SWITCH(...) BP_OPT_SWITCH(bp_train_config, __VA_ARGS__)

/* The training's own options: the model's kind, the step's clipping, the cadence, the
 * outputs and the grid; their defaults are set by bp_train_config_defaults. */
static const bp_option training_options[] = {
    CHOICE("model", model, BP_MODEL_KIND_CHOICES, "model to train", NULL),
    {"batch", BP_OPT_INT, OFF(batch), 0, NULL, 1, 1 << 20, "B", "global batch size",
     "16 for gpt, 64 for mlp"},
    {"steps", BP_OPT_INT64, OFF(steps), 0, NULL, 1, 1e12, "N", "optimizer steps",
     "1000 for gpt, one epoch for mlp"},
    NUM("clip", BP_OPT_DOUBLE, clip, 0, 1e9, "X", "clip the gradient norm to this (0: off)"),
    NUM("seed", BP_OPT_INT64, seed, 0, 9.2e18, "N", "seed of initialization and data order"),
    NUM("eval-every", BP_OPT_INT64, eval_every, 0, 1e12, "N",
        "evaluate every N steps and at the end (0: never)"),
    NUM("eval-batches", BP_OPT_INT, eval_batches, 1, 10000, "N",
        "gpt: fixed validation batches per evaluation (mlp uses the whole test set; at most "
        "10000)"),
    STR("out", out, "DIR", "checkpoints and metrics go here", "runs/<model>"),
    STR("resume", resume, "DIR", "continue from the checkpoint in DIR (or DIR/latest)", NULL),
    SWITCH("overwrite", overwrite,
           "start a new run in an --out that holds one (its log is truncated, `latest` replaced)"),
    STR("metrics", metrics, "FILE", "JSONL metrics log (appended when resuming)",
        "<out>/metrics.jsonl"),
    STR("trace", trace, "FILE",
        "write every rank's compute and communication as Chrome trace events (Perfetto)", "off"),
    NUM("trace-events", BP_OPT_INT64, trace_events, 1, 1e9, "N",
        "--trace: keep at most the last N events per rank"),
    NUM("checkpoint-every", BP_OPT_INT64, checkpoint_every, 0, 1e12, "N",
        "also save a checkpoint every N steps (one is always saved at the end)"),
    NUM("keep-checkpoints", BP_OPT_INT, keep_checkpoints, 1, 1 << 20, "N",
        "keep the newest N checkpoints in --out"),
    SWITCH("no-final-checkpoint", no_final_checkpoint,
           "save none at the end (benchmarks, sweeps); --checkpoint-every's and a stopped "
           "run's are still saved"),
    NUM("log-every", BP_OPT_INT64, log_every, 1, 1e12, "N", "progress line every N steps"),
    CHOICE("progress", progress, "auto|bar|lines|none",
           "live bar on a terminal, plain lines otherwise, as in a log under mpirun (auto)", NULL),
    NUM("threads", BP_OPT_INT, threads, 1, 1024, "N", "BLAS threads of this process"),
    CHOICE("matmul", matmul, BP_BLAS_CHOICES,
           "matrix library of the CPU products (blis, dnnl: where the build found them); auto: "
           "per product shape the fastest on this CPU, measured once and kept under --cache-dir "
           "(results then differ from openblas's within rounding)",
           NULL),
    {"dp", BP_OPT_INT, OFF(dp), 0, NULL, 1, 1 << 20, "N", "data-parallel replicas",
     "the ranks / (pp x tp)"},
    NUM("tp", BP_OPT_INT, tp, 1, 1 << 16, "T",
        "tensor-parallel ranks per stage (gpt: heads and MLP split Megatron-style)"),
    /* Bounded where a step would hold more data and run longer than anyone means:
     * each accumulated micro-batch's tokens are drawn and held for the whole step. */
    NUM("grad-accum", BP_OPT_INT, grad_accum, 1, 4096, "K",
        "micro-batches per optimizer step (the global batch becomes --batch x K; at most 4096)"),
    CHOICE("dp-algo", dp_algo, BP_DP_ALGO_CHOICES, "how the data-parallel replicas agree", NULL),
    SWITCH("skip-nonfinite", skip_nonfinite,
           "skip a step whose loss or gradients are not finite (on every rank) instead of "
           "stopping"),
};

static const bp_option_group training_group = {training_options,
                                                (int)(sizeof training_options /
                                                      sizeof training_options[0]),
                                                NULL, 0};

/* Every feature's options at its place in bp_train_config, in the order --help
 * lists them: those before the data-parallel algorithms', then each algorithm's in
 * its slot of dp_settings, in the registry's order, then those after. */
static const bp_option_place features_before[] = {
    {&training_group, 0, NULL},
    {&bp_model_options, OFF(shape), "model"},
    {&bp_optim_options, OFF(optim), "optimizer"},
    {&bp_data_options, OFF(data), "data"},
    {&bp_pipeline_options, OFF(pipeline), "pipeline"},
    {&bp_avgpipe_options, OFF(avgpipe), "AvgPipe"},
};
static const bp_option_place features_after[] = {
    {&bp_communication_options, OFF(comm), "communication"},
    {&bp_occ_options, OFF(occ), "Optimus-CC"},
    {&bp_device_options, OFF(device), "device"},
    {&bp_fault_options, OFF(faults), "testing: faults"},
};
/* Each algorithm's heading: "--dp-algo <name>". */
#define ALGO_TITLE(id, name, ops) "--dp-algo " name,
static const char *const algo_titles[] = {BP_DP_ALGOS(ALGO_TITLE)};
#undef ALGO_TITLE
#define N_BEFORE ((int)(sizeof features_before / sizeof features_before[0]))
#define N_AFTER ((int)(sizeof features_after / sizeof features_after[0]))
enum { MAX_PLACES = N_BEFORE + BP_DP_N_ALGOS + N_AFTER };

/* The places of every feature's options into out (MAX_PLACES); their number. */
static int feature_places(bp_option_place *out) {
    int n = 0;
    for (int i = 0; i < N_BEFORE; i++) out[n++] = features_before[i];
    for (int a = 0; a < BP_DP_N_ALGOS; a++) {
        const bp_option_group *g = bp_dp_algo_options(a);
        assert(!g || g->size <= BP_DP_SETTINGS_BYTES);
        if (g)
            out[n++] = (bp_option_place){g, OFF(dp_settings) + (size_t)a * BP_DP_SETTINGS_BYTES,
                                         algo_titles[a]};
    }
    for (int i = 0; i < N_AFTER; i++) out[n++] = features_after[i];
    return n;
}

bp_option *bp_train_options_with(const bp_option *own, int n_own, int *n) {
    bp_option_place places[MAX_PLACES];
    return bp_options_compose(places, feature_places(places), own, n_own, n);
}

void bp_train_print_help(FILE *f, const bp_option *opts, int n_opts, const char *own_title,
                         const void *defaults) {
    bp_option_place places[MAX_PLACES];
    int n = feature_places(places), n_own = n_opts;
    for (int g = 0; g < n; g++) n_own -= places[g].group->n;
    bp_options_print_help_placed(f, opts, places, n, n_own, own_title, defaults);
}

void bp_train_config_defaults(bp_train_config *c) {
    memset(c, 0, sizeof *c);
    c->model = BP_MODEL_GPT;
    c->batch = -1;
    c->steps = -1;
    c->clip = 0;
    c->seed = 1234;
    c->eval_every = 100;
    c->eval_batches = 20;
    c->keep_checkpoints = 2;
    c->trace_events = 200000;
    c->log_every = 10;
    c->progress = BP_PROGRESS_AUTO;
    c->threads = 1;
    c->grad_accum = 1;
    c->tp = 1;
    c->dp_algo = BP_DP_ALLREDUCE;
    bp_option_place places[MAX_PLACES];
    bp_options_place_defaults(places, feature_places(places), c);
}

/* The algorithm the run's replicas agree by: AvgPipe's with --pipelines, else --dp-algo's. */
static int run_algo(const bp_train_config *c) {
    return c->avgpipe.pipelines > 0 ? BP_DP_AVGPIPE : c->dp_algo;
}

static void fill_defaults(bp_train_config *c) {
    const bp_model_facts *f = bp_model_kind_facts((bp_model_kind)c->model);
    bp_data_settings_fill(&c->data, f->data);
    if (c->batch < 0) c->batch = f->batch;
    if (c->steps < 0) c->steps = f->steps ? f->steps : f->train_samples / c->batch;
    bp_optim_settings *o = &c->optim;
    if (o->kind < 0) o->kind = (int)f->optim;
    if (o->beta2 < 0) {
        const bp_dp_algo_ops *ops = bp_dp_ops(run_algo(c));
        o->beta2 = ops->default_beta2 > 0 ? ops->default_beta2 : 0.95;
    }
    if (o->lr < 0) o->lr = f->lr;
    if (o->lr_schedule < 0) o->lr_schedule = (int)f->lr_schedule;
    if (!c->out[0]) snprintf(c->out, sizeof c->out, "runs/%s", f->name);
    if (!c->metrics[0]) bp_path_join(c->metrics, sizeof c->metrics, c->out, "metrics.jsonl", NULL);
}

/* What does not run on the GPU yet, refused before any work with one line naming it
 * (the CUDA gpt's own limits: nn/cuda/model_cuda.h). */
static bp_status check_cuda(const bp_train_config *c, bp_err *err) {
    const bp_model_facts *f = bp_model_kind_facts((bp_model_kind)c->model);
    if (!f->on_cuda)
        return bp_fail(err, BP_EUSAGE,
                       "option --device cuda: --model %s does not run on the GPU yet", f->name);
    if (c->tp > 1)
        return bp_fail(err, BP_EUSAGE,
                       "option --device cuda: tensor parallelism (--tp %d) does "
                       "not run on the GPU yet",
                       c->tp);
    if (c->device.dtype == BP_DTYPE_BF16 && c->pipeline.stages > 1)
        return bp_fail(err, BP_EUSAGE,
                       "option --dtype bf16: runs on one pipeline stage only "
                       "(--pp 1) so far; the boundaries between stages are fp32");
    if (c->device.gpu_comm == BP_GPU_COMM_NCCL)
        return bp_fail(err, BP_EUSAGE,
                       "option --gpu-comm nccl: device buffers travel through "
                       "host memory so far (NCCL is not wired into training yet)");
    return BP_OK;
}

/* What an emulated device, which computes no values, cannot do: one line each. */
static bp_status check_emu(const bp_train_config *c, bp_err *err) {
    const char *title = c->device.sheet->title;
    if (c->checkpoint_every > 0 || c->resume[0])
        return bp_fail(err, BP_EUSAGE,
                       "option --%s: the emulated %s computes no values, so there are no "
                       "checkpoints to save or resume",
                       c->resume[0] ? "resume" : "checkpoint-every", title);
    if (c->device.gpu_comm == BP_GPU_COMM_NCCL)
        return bp_fail(err, BP_EUSAGE,
                       "option --gpu-comm nccl: the emulated %s's buffers travel through host "
                       "memory",
                       title);
    return BP_OK;
}

bp_status bp_train_config_finalize(bp_train_config *c, bp_err *err) {
    if (bp_train_device_resolve(&c->device, err)) return BP_EUSAGE;
    fill_defaults(c);
    const bp_model_facts *f = bp_model_kind_facts((bp_model_kind)c->model);
    bp_model_config m;
    bp_train_model_config(c, &m);
    if (bp_model_settings_check(&c->shape, (bp_model_kind)c->model, err)) return BP_EUSAGE;
    if (f->train_samples && c->batch > f->train_samples)
        return bp_fail(err, BP_EUSAGE, "option --batch: %d is larger than the %d training samples",
                       c->batch, f->train_samples);
    if (bp_optim_settings_check(&c->optim, c->steps, err)) return BP_EUSAGE;
    if (strlen(c->metrics) == 0)
        return bp_fail(err, BP_EUSAGE, "option --out: path too long");
    if (c->device.kind == BP_DEVICE_CUDA && check_cuda(c, err)) return BP_EUSAGE;
    if (c->device.kind == BP_DEVICE_EMU && check_emu(c, err)) return BP_EUSAGE;
    const bp_device_settings *d = &c->device;
    bool gpu = d->kind == BP_DEVICE_CUDA || d->kind == BP_DEVICE_EMU;
    if (!gpu && d->gpu_comm != BP_GPU_COMM_AUTO)
        return bp_fail(err, BP_EUSAGE, "option --gpu-comm: needs --device cuda or emu:GPU");
    if (d->dtype == BP_DTYPE_BF16 && d->kind == BP_DEVICE_CHECK)
        return bp_fail(err, BP_EUSAGE,
                       "option --dtype bf16: runs on --device cpu or cuda, or an emulated emu:GPU");
    if (d->dtype == BP_DTYPE_BF16 && d->kind == BP_DEVICE_CPU && c->model != BP_MODEL_GPT)
        return bp_fail(err, BP_EUSAGE, "option --dtype bf16: trains gpt only");
    if (d->kind != BP_DEVICE_EMU && d->dilation > 0)
        return bp_fail(err, BP_EUSAGE, "option --dilation: needs --device emu:GPU");
    int rc = bp_data_settings_check(&c->data, err);
    if (rc == BP_OK) rc = bp_model_config_check(&m, err);
    if (rc == BP_OK && (rc = bp_model_tp_check(&m, c->tp, err))) bp_err_context(err, "option --tp");
    return rc;
}

void bp_train_model_config(const bp_train_config *c, bp_model_config *m) {
    bp_model_settings_config(&c->shape, (bp_model_kind)c->model, m);
}

void bp_train_optim_config(const bp_train_config *c, bp_optim_config *o) {
    bp_optim_settings_config(&c->optim, o);
}

void bp_train_dp_config(const bp_train_config *c, bp_dp_config *d) {
    *d = (bp_dp_config){
        .algo = run_algo(c),
        .settings = c->dp_settings,
        .replicas = bp_train_replicas(c),
        .hierarchical = c->comm.hierarchical,
        .node_size = c->comm.node_size,
        .bucket_mb = isnan(c->comm.bucket_mb) ? BP_DP_BUCKET_MB : c->comm.bucket_mb,
        .bucket_auto = isnan(c->comm.bucket_mb),
        .overlap = !c->comm.no_overlap,
        /* A bucket's update may start before the step's gradient norm is known and
         * before the ranks agree to skip it: only without clipping, skipping and
         * the tied embedding's sync between stages. */
        .early_update = c->clip == 0 && !c->skip_nonfinite && c->pipeline.stages == 1,
        .poll_s = c->comm.poll_us * 1e-6,
        .seed = (uint64_t)c->seed,
    };
    *bp_avgpipe_in(&d->settings) = c->avgpipe; /* for bp_avgpipe_ops */
}

void bp_train_occ_config(const bp_train_config *c, bp_occ_config *o) {
    const bp_occ_settings *s = &c->occ;
    *o = (bp_occ_config){
        .cb_rank = s->cb ? s->cb_rank : 0,
        .lep = !s->no_lep,
        .epilogue_only = s->cb_epilogue_only,
        .cb_warmup_steps = s->cb_warmup,
        .seed = (uint64_t)c->seed,
        .fused_embedding = s->fused_embedding_sync,
        .sc_stages = s->sc_stages,
        .sc_rank = s->sc_rank,
        .sc_warmup_steps = (int64_t)(s->sc_warmup * (double)c->steps),
    };
}

/* The grid: --dp x --pp x --tp ranks must be the job's, and each replica's batch
 * must split into the micro-batches (of every pipeline, when they split one). */
static bp_status check_grid(bp_train_config *c, int world, bp_err *err) {
    /* Products in 64 bits: each option is in range, but --dp x --micro-batches (or
     * --pp x --tp) need not fit an int. */
    int pp = c->pipeline.stages;
    int64_t pt = (int64_t)pp * c->tp, M = c->pipeline.micro_batches;
    if (world % pt)
        return bp_fail(err, BP_EUSAGE,
                       "option --pp: %d stages x --tp %d do not divide the %d ranks", pp,
                       c->tp, world);
    if (c->dp == 0) c->dp = (int)(world / pt);
    if (c->dp * pt != world)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp: %d replicas x %d stages x %d tp ranks need %lld ranks, but "
                       "the job has %d (mpirun -np)",
                       c->dp, pp, c->tp, (long long)(c->dp * pt), world);
    int64_t N = bp_train_replicas(c);
    if (c->avgpipe.pipelines > 0 && bp_train_batches_per_step(c) == 1 && c->batch % (c->dp * N * M))
        return bp_fail(err, BP_EUSAGE,
                       "option --batch: %d is not divisible by --dp %d x --pipelines %d x "
                       "--micro-batches %d (with --avgpipe-batch split)",
                       c->batch, c->dp, (int)N, (int)M);
    if (c->batch % (c->dp * M))
        return bp_fail(err, BP_EUSAGE,
                       "option --batch: %d is not divisible by --dp %d x --micro-batches %d",
                       c->batch, c->dp, (int)M);
    return BP_OK;
}

/* Optimus-CC's combinations, and CB's rank against every boundary's gradient. */
static bp_status check_occ(const bp_train_config *c, const bp_model_config *mc, bp_err *err) {
    bp_occ_config occ;
    bp_train_occ_config(c, &occ);
    bp_status rc = bp_occ_check(&occ, bp_model_tied_tensor(mc) != NULL, c->pipeline.stages,
                                c->dp_algo, c->avgpipe.pipelines > 0, err);
    size_t cb_rows = (size_t)bp_train_micro_rows(c, c->dp) * (size_t)bp_model_sample_len(mc);
    for (int b = 1; rc == BP_OK && c->occ.cb && b < bp_model_num_blocks(mc); b++)
        rc = bp_cb_check_shape(c->occ.cb_rank, cb_rows, (size_t)bp_model_boundary_width(mc, b),
                               err);
    return rc;
}

bp_status bp_train_grid_ranks(const bp_train_config *c, int dp, int stages, int *world,
                              bp_err *err) {
    int64_t w = (int64_t)dp * stages * c->tp;
    *world = 0;
    if (w > BP_MAX_RANKS)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp: %d replicas x %d stages x %d tp ranks are %lld ranks, more "
                       "than the %d a job may have",
                       dp, stages, c->tp, (long long)w, BP_MAX_RANKS);
    *world = (int)w;
    return BP_OK;
}

bp_status bp_train_config_check_world(bp_train_config *c, int world, bp_err *err) {
    bp_model_config mc;
    bp_train_model_config(c, &mc);
    bp_status rc = check_grid(c, world, err);
    if (rc == BP_OK) rc = check_occ(c, &mc, err);
    if (rc == BP_OK)
        rc = bp_avgpipe_check(&c->avgpipe, c->dp_algo, c->clip != 0, c->skip_nonfinite, err);
    if (rc == BP_OK) rc = bp_pipeline_check(&c->pipeline, bp_model_num_blocks(&mc), err);
    if (rc == BP_OK) rc = bp_communication_check(&c->comm, err);
    if (rc) return rc;
    bp_dp_config d;
    bp_train_dp_config(c, &d);
    const bp_dp_algo_ops *ops = bp_dp_ops(d.algo);
    if (ops->fill_defaults) {
        ops->fill_defaults(&d, c->dp);
        c->dp_settings = d.settings;
    }
    return bp_dp_config_check(&d, c->dp, (bp_optim_kind)c->optim.kind, err);
}

int bp_train_replicas(const bp_train_config *c) {
    return c->avgpipe.pipelines > 0 ? c->avgpipe.pipelines : 1;
}

int bp_train_batches_per_step(const bp_train_config *c) {
    const bp_avgpipe_settings *a = &c->avgpipe;
    return a->pipelines > 0 && a->batch == BP_AVGPIPE_OWN_BATCH ? a->pipelines : 1;
}

/* What local steps need of the run: no clipping or skipping, more than one rank. */
static bool local_allowed(const bp_train_config *c, int world) {
    return c->clip == 0 && !c->skip_nonfinite && world > 1;
}

bool bp_train_local_steps(const bp_train_config *c, int world) {
    bp_dp_config d;
    bp_train_dp_config(c, &d);
    return local_allowed(c, world) && bp_dp_has_local_steps(&d);
}

bool bp_train_local_step(const bp_train_config *c, int world, int64_t n) {
    bp_dp_config d;
    bp_train_dp_config(c, &d);
    return local_allowed(c, world) && bp_dp_local_step(&d, n);
}

int bp_train_stream_steps(const bp_train_config *c) {
    if (c->avgpipe.pipelines == 0 || !bp_train_local_steps(c, 2) || c->avgpipe.flush == BP_FLUSH_STEP)
        return 1;
    int64_t period = bp_easgd_of(&c->dp_settings)->period;
    return period < BP_MAX_STREAM ? (int)period : BP_MAX_STREAM;
}

int bp_train_micro_rows(const bp_train_config *c, int dp) {
    int N = c->avgpipe.pipelines;
    int split = N > 0 && bp_train_batches_per_step(c) == 1 ? N : 1;
    return c->batch / (dp * split * c->pipeline.micro_batches);
}

void bp_train_lr_schedule(const bp_train_config *c, bp_lr_schedule *s) {
    bp_optim_settings_schedule(&c->optim, c->steps, s);
}

bp_status bp_train_config_match(const bp_model_config *run, const bp_model_config *ckpt,
                                const char *ckpt_dir, bp_err *err) {
    if (run->kind != ckpt->kind)
        return bp_fail(err, BP_EUSAGE, "checkpoint %s holds a %s model but --model is %s", ckpt_dir,
                       bp_model_kind_name(ckpt->kind), bp_model_kind_name(run->kind));
    const struct {
        const char *option;
        int a, b;
    } fields[] = {
        {"--layers", run->n_layer, ckpt->n_layer}, {"--embd", run->n_embd, ckpt->n_embd},
        {"--heads", run->n_head, ckpt->n_head},    {"--seq-len", run->seq_len, ckpt->seq_len},
        {"--hidden", run->hidden, ckpt->hidden},   {"--hidden-layers", run->n_hidden, ckpt->n_hidden},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (fields[i].a != fields[i].b)
            return bp_fail(err, BP_EUSAGE,
                           "checkpoint %s was written with %s %d but this run has %s %d", ckpt_dir,
                           fields[i].option, fields[i].b, fields[i].option, fields[i].a);
    if (run->vocab != ckpt->vocab || run->in_dim != ckpt->in_dim || run->n_class != ckpt->n_class)
        return bp_fail(err, BP_EUSAGE, "checkpoint %s has another input or output size", ckpt_dir);
    return BP_OK;
}
