/* Options of `bagpipe train`: one struct, one option table, one validation.
 *
 * Defaults that depend on the model (batch, steps, optimizer, learning rate, data)
 * are left unset (negative or empty) by bp_train_config_defaults and filled in by
 * bp_train_config_finalize, so `--help` can state both defaults. */
#ifndef BP_TRAIN_CONFIG_H
#define BP_TRAIN_CONFIG_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "core/file.h"
#include "core/options.h"
#include "nn/lr.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "parallel/dp.h"
#include "parallel/occ.h"
#include "parallel/schedule.h"

typedef enum bp_progress_mode {
    BP_PROGRESS_AUTO, /* a live bar on a terminal, plain lines otherwise */
    BP_PROGRESS_BAR,
    BP_PROGRESS_LINES,
    BP_PROGRESS_NONE
} bp_progress_mode;

typedef struct bp_train_config {
    int model; /* a bp_model_kind */
    char data[BP_PATH_MAX];
    char cache_dir[BP_PATH_MAX];
    int layers, embd, heads, seq_len; /* gpt */
    int hidden, hidden_layers;        /* mlp */
    int batch;
    int64_t steps;
    int optim;    /* BP_OPTIM_ADAMW or BP_OPTIM_SGD */
    int lr_schedule; /* BP_LR_CONSTANT or BP_LR_COSINE */
    double lr, min_lr_ratio;
    int64_t warmup;
    double beta1, beta2, eps, momentum, weight_decay, clip;
    int64_t seed;
    int64_t eval_every;
    int eval_batches;
    char out[BP_PATH_MAX];
    char resume[BP_PATH_MAX];
    char metrics[BP_PATH_MAX];
    char trace[BP_PATH_MAX]; /* Chrome trace events of every rank ("": off) */
    int64_t trace_events;    /* at most this many events kept per rank */
    int64_t checkpoint_every;
    int keep_checkpoints;
    int64_t log_every;
    int progress; /* bp_progress_mode */
    int threads;
    /* parallelism and communication */
    int dp;          /* data-parallel replicas (0: every rank not used by other axes) */
    int pp;          /* pipeline stages */
    int tp;          /* tensor-parallel ranks per stage (gpt) */
    char partition[256]; /* blocks per stage, "2,3,3"; "" balances measured time */
    int micro_batches;   /* per optimizer step and per gradient accumulation */
    char schedule[32];      /* pipeline schedule: gpipe | 1f1b | afp:K */
    int pipelines;          /* AvgPipe: parallel pipelines per stage rank (0: off) */
    int avgpipe_batch;      /* AvgPipe: 0 each pipeline its own batch, 1 one batch split */
    int avgpipe_flush;      /* AvgPipe: BP_FLUSH_AUTO, _STEP (every step) or _AVERAGE */
    /* Optimus-CC */
    int cb;               /* compressed backpropagation on */
    int cb_rank;
    int no_lep;
    int cb_epilogue_only;
    int64_t cb_warmup;    /* steps with every backward send whole first */
    int fused_embedding_sync; /* fused embedding synchronization */
    int sc_stages;        /* selective stage compression: stages below this compress dp */
    int sc_rank;
    double sc_warmup;     /* fraction of --steps with full-precision dp first */
    int grad_accum;  /* micro-batches per optimizer step */
    int dp_algo;     /* bp_dp_algo */
    int peers;       /* 0 shift_one, 1 all */
    int64_t interval;
    int decentralized_order; /* 0 bagua, 1 step-first */
    int sync_ms;
    int64_t async_warmup;
    int powersgd_rank;
    int64_t powersgd_warmup;
    double ea_alpha;
    int64_t ea_period;
    int64_t qadam_warmup;
    int hierarchical;
    int node_size;
    double bucket_mb;
    int no_overlap;
    double comm_poll_us;
    char net[256];
    double comm_timeout;
    int comm_path; /* bp_path */
    int skip_nonfinite;
    int overwrite; /* start over in an --out that holds a run */
    /* fault injection, for tests: at step fault_at_step (-1: never) the given rank
     * kills itself (SIGKILL), hangs, produces a NaN loss, or has a NaN weight */
    int fault_kill_rank, fault_hang_rank, fault_nan_rank, fault_nan_weights_rank;
    int64_t fault_at_step;
    /* GPU backend */
    int device;   /* bp_device_kind */
    int gpu_comm; /* bp_gpu_comm */
    int dtype;    /* bp_dtype */
} bp_train_config;

/* How device buffers travel between ranks (--gpu-comm): NCCL when every rank has a GPU
 * of its own, MPI through pinned host memory otherwise (auto), or forced. */
typedef enum bp_gpu_comm { BP_GPU_COMM_AUTO, BP_GPU_COMM_NCCL, BP_GPU_COMM_MPI } bp_gpu_comm;
/* Precision of the GPU's computation (--dtype): fp32, or bf16 activations and weight
 * copies over fp32 master weights, gradients and optimizer state. */
typedef enum bp_dtype { BP_DTYPE_FP32, BP_DTYPE_BF16 } bp_dtype;

void bp_train_config_defaults(bp_train_config *c);
const bp_option *bp_train_options(int *n);
/* train's options followed by a command's own (simulate, tune, plan), in a new array
 * the caller frees; NULL when out of memory. */
bp_option *bp_train_options_with(const bp_option *own, int n_own, int *n);
/* Fill model-dependent defaults and check combinations; messages name the option. */
bp_status bp_train_config_finalize(bp_train_config *c, bp_err *err);

/* Derived settings. */
void bp_train_model_config(const bp_train_config *c, bp_model_config *m);
void bp_train_optim_config(const bp_train_config *c, bp_optim_config *o);
void bp_train_lr_schedule(const bp_train_config *c, bp_lr_schedule *s);
/* Batches of --batch samples one step draws (and its micro-batches share): N with
 * AvgPipe's own batches, else 1; and the rows of one micro-batch on `dp` replicas. */
int bp_train_batches_per_step(const bp_train_config *c);
/* Whether AvgPipe's steps between averagings leave out the agreement and the
 * gradient norm (parallel/step.h) on `world` ranks: no clipping, no skipping. */
bool bp_train_local_steps(const bp_train_config *c, int world);
/* --avgpipe-flush */
enum { BP_FLUSH_AUTO, BP_FLUSH_STEP, BP_FLUSH_AVERAGE, BP_MAX_STREAM = 64 };
/* The most steps one pipeline stream runs without a flush (parallel/step.h): with
 * local steps and --avgpipe-flush auto or average, the period tau (at most
 * BP_MAX_STREAM); else 1. A stream also ends at evaluations and checkpoints. */
int bp_train_stream_steps(const bp_train_config *c);
int bp_train_micro_rows(const bp_train_config *c, int dp);
void bp_train_dp_config(const bp_train_config *c, bp_dp_config *d);
void bp_train_occ_config(const bp_train_config *c, bp_occ_config *o);

/* Check the options that depend on the number of ranks (world size W). */
bp_status bp_train_config_check_world(bp_train_config *c, int world, bp_err *err);

/* Name the first field where a checkpoint's model configuration differs from this
 * run's, as the option that sets it; BP_OK when they agree. */
bp_status bp_train_config_match(const bp_model_config *run, const bp_model_config *ckpt,
                                const char *ckpt_dir, bp_err *err);

#endif
