/* Options of `bagpipe train`: each feature's settings and options composed into one
 * struct and one table, and one validation that calls each feature's check.
 *
 * Defaults that depend on the model (batch, steps, optimizer, learning rate, data)
 * are left unset (negative or empty) by bp_train_config_defaults and filled in by
 * bp_train_config_finalize, so `--help` can state both defaults. */
#ifndef BP_TRAIN_CONFIG_H
#define BP_TRAIN_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "core/file.h"
#include "core/options.h"
#include "data/source.h"
#include "nn/lr.h"
#include "nn/model.h"
#include "nn/model_options.h"
#include "nn/optim.h"
#include "nn/optim_options.h"
#include "parallel/avgpipe.h"
#include "parallel/communication.h"
#include "parallel/dp.h"
#include "parallel/occ.h"
#include "parallel/pipeline.h"
#include "parallel/schedule.h"
#include "train/device.h"
#include "train/faults.h"

typedef enum bp_progress_mode {
    BP_PROGRESS_AUTO, /* a live bar on a terminal, plain lines otherwise */
    BP_PROGRESS_BAR,
    BP_PROGRESS_LINES,
    BP_PROGRESS_NONE
} bp_progress_mode;

/* The options of `bagpipe train` are the composition of each feature's: the
 * training itself (model kind, cadence, outputs, grid) is this struct's own fields,
 * and every feature holds its typed settings in a member of its own, set by the
 * options its file declares. */
typedef struct bp_train_config {
    int model; /* a bp_model_kind */
    int batch;
    int64_t steps;
    double clip; /* the step's gradient norm clipping (0: off) */
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
    bool no_final_checkpoint; /* the end saves nothing (a stop request still does) */
    int64_t log_every;
    bp_progress_mode progress;
    int threads;
    int matmul; /* bp_blas_lib */
    int dp;          /* data-parallel replicas (0: every rank not used by other axes) */
    int tp;          /* tensor-parallel ranks per stage (gpt) */
    int grad_accum;  /* micro-batches per optimizer step */
    bp_dp_algo dp_algo;
    bool skip_nonfinite;
    bool overwrite; /* start over in an --out that holds a run */
    bp_model_settings shape;             /* nn/model_options.h */
    bp_optim_settings optim;             /* nn/optim_options.h: with the lr schedule */
    bp_data_settings data;               /* data/source.h */
    bp_pipeline_settings pipeline;       /* parallel/pipeline.h */
    bp_avgpipe_settings avgpipe;         /* parallel/avgpipe.h */
    bp_occ_settings occ;                 /* parallel/occ.h: Optimus-CC */
    /* Each data-parallel algorithm's settings in its slot, set by the options in its
     * ops (parallel/dp/settings.h; parallel/dp/<name>.h types them where others read
     * them: easgd's are also AvgPipe's elastic averaging). */
    bp_dp_settings dp_settings;
    bp_communication_settings comm;      /* parallel/communication.h */
    bp_device_settings device;           /* train/device.h */
    bp_fault_settings faults;            /* train/faults.h: for tests */
} bp_train_config;

void bp_train_config_defaults(bp_train_config *c);
/* train's options followed by a command's own (simulate, tune, plan; none: NULL, 0),
 * in a new array the caller frees; NULL when out of memory. */
bp_option *bp_train_options_with(const bp_option *own, int n_own, int *n);
/* --help of the n_opts options bp_train_options_with made: each feature's under its
 * heading (the run's own first, without one), then the command's own under
 * own_title. */
void bp_train_print_help(FILE *f, const bp_option *opts, int n_opts, const char *own_title,
                         const void *defaults);
/* Fill model-dependent defaults and check combinations; messages name the option. */
bp_status bp_train_config_finalize(bp_train_config *c, bp_err *err);

/* Derived settings. */
void bp_train_model_config(const bp_train_config *c, bp_model_config *m);
void bp_train_optim_config(const bp_train_config *c, bp_optim_config *o);
void bp_train_lr_schedule(const bp_train_config *c, bp_lr_schedule *s);
/* Batches of --batch samples one step draws (and its micro-batches share): N with
 * AvgPipe's own batches, else 1; and the rows of one micro-batch on `dp` replicas. */
int bp_train_batches_per_step(const bp_train_config *c);
/* The replicas of each stage's blocks: AvgPipe's --pipelines, else 1. */
int bp_train_replicas(const bp_train_config *c);
/* Whether the steps between the dp algorithm's meetings (AvgPipe's and easgd's
 * averagings, DiLoCo's outer steps and fragments: bp_dp_local_step) leave out the
 * agreement and the gradient norm (parallel/step.h) on `world` ranks: only without
 * clipping and skipping, which need every step's norm and verdict. */
bool bp_train_local_steps(const bp_train_config *c, int world);
/* Whether step n (from 1) is such a local step. */
bool bp_train_local_step(const bp_train_config *c, int world, int64_t n);
/* The longest stream of steps without a flush. */
enum { BP_MAX_STREAM = 64 };
/* The most steps one pipeline stream runs without a flush (parallel/step.h): with
 * local steps and --avgpipe-flush auto or average, the period tau (at most
 * BP_MAX_STREAM); else 1. A stream also ends at evaluations and checkpoints. */
int bp_train_stream_steps(const bp_train_config *c);
int bp_train_micro_rows(const bp_train_config *c, int dp);
void bp_train_dp_config(const bp_train_config *c, bp_dp_config *d);
void bp_train_occ_config(const bp_train_config *c, bp_occ_config *o);

/* The ranks of a grid of dp replicas x stages x --tp, for the commands that model a
 * job instead of running in one (simulate, tune); BP_EUSAGE above BP_MAX_RANKS. */
enum { BP_MAX_RANKS = 1 << 24 };
bp_status bp_train_grid_ranks(const bp_train_config *c, int dp, int stages, int *world,
                              bp_err *err);

/* Check the options that depend on the number of ranks (world size W). */
bp_status bp_train_config_check_world(bp_train_config *c, int world, bp_err *err);

/* Name the first field where a checkpoint's model configuration differs from this
 * run's, as the option that sets it; BP_OK when they agree. */
bp_status bp_train_config_match(const bp_model_config *run, const bp_model_config *ckpt,
                                const char *ckpt_dir, bp_err *err);

#endif
