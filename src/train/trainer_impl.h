/* The trainer's state, shared by trainer.c (set-up and the step loop), evaluate.c
 * and save.c (checkpoints and resume). Not part of any public API. */
#ifndef BP_TRAIN_TRAINER_IMPL_H
#define BP_TRAIN_TRAINER_IMPL_H

#include <signal.h>
#include <stdbool.h>

#include "core/file.h"
#include "core/trace.h"
#include "parallel/dp.h"
#include "parallel/grid.h"
#include "parallel/stage.h"
#include "formats/checkpoint.h"
#include "train/device.h"
#include "train/outputs.h"
#include "formats/metrics.h"
#include "formats/trace_file.h"
#include "train/progress.h"
#include "train/task.h"
#include "train/trainer.h"

/* Memory that does not grow with --steps or --log-every: step times kept for the
 * median, and steps held before they are logged. */
enum { TRAINER_MAX_TIMES = 1 << 20, TRAINER_MAX_PENDING = 1024 };

typedef struct trainer {
    const bp_train_config *cfg;
    bp_comm *world;
    bp_comm *meta; /* bookkeeping (losses, agreement) on its own, never emulated */
    int rank, size;
    bp_grid grid;
    int *first;          /* pipeline partition: stage s holds blocks [first[s], first[s+1]) */
    char partition[256]; /* the same as text */
    bp_stage *stage; /* this rank's models, pipeline and data-parallel algorithm */
    bp_trace *trace; /* --trace; NULL: off */
    bp_batch *micro; /* the micro-batches of one step */
    int n_micro, micro_B;
    bp_lr_schedule lr;
    bp_task task;
    bp_metrics metrics;
    bp_progress progress;
    int64_t step, first_step;
    double start_time;
    double *step_ms;         /* per step of this run (the last TRAINER_MAX_TIMES), for the median */
    bp_step_record *pending; /* steps not logged yet (losses come from the last stage) */
    int n_pending;
    bp_train_result *res;
    const volatile sig_atomic_t *stop;
    bool stopping; /* every rank agreed to stop after this step */
    const bp_train_probe *probe; /* bp_train_probe_run; NULL: a run of its own */
    int64_t end_step;            /* --steps, or the probe's steps */
    bool probe_done;             /* the probe's on_eval ended the run */
    int out_fd;    /* rank 0: --out, opened and locked for this run; -1: none */
    bool resuming;
    bp_manifest resume_from; /* when resuming */
    bp_train_device dev;     /* --device, --dtype; the models' memory lives on dev.be */
    double dilation;         /* emulated: durations this many times longer (1 otherwise) */
    double work0_s;          /* emulated: the device's modeled work when the steps began */
    char net[256];           /* --net as the links run it (dilated) */
    char resume_dir[4096];   /* the ckpt-* directory of --resume */
    double bucket_mb_measured; /* --bucket-mb auto: the size chosen (0: not yet) */
    bool matmul_noted;         /* --matmul: the libraries used were logged */
    /* What this rank keeps beyond the consensus model (bp_dp_state, bp_pipe_state),
     * saved in its replica file when some rank keeps anything (replica_files), under
     * the options that shape it (replica_key). */
    bp_state_list replica_state;
    bp_state_list replica_host; /* host copies of replica_state's buffers (save.c) */
    bool replica_files;
    char replica_key[512];
    uint32_t *replica_crc; /* every rank's replica file's CRC-32, for the manifest */
    float *avg_params, *avg_m, *avg_v; /* replicas averaged for a checkpoint (on dev.be) */
    float *eval_saved;                 /* replica 0's weights while it evaluates the average */
    float *host_params, *host_m, *host_v; /* host copies of what a checkpoint writes */
    float *host_logits;                   /* host copy of an evaluation's logits */
} trainer;

/* The ranks whose loss is logged: the last stage of every replica (tp rank 0). */
static inline bool trainer_reports_loss(const trainer *t) { return bp_grid_reports_loss(&t->grid); }
/* The ranks that evaluate and save: every stage and tp rank of replica 0. */
static inline bool trainer_in_replica0(const trainer *t) { return t->grid.d == 0; }

/* This stage's data-parallel settings: --dp-algo, with Optimus-CC's changes (the
 * fused embedding left out of the reduction, selective stage compression). */
void trainer_dp_config(const trainer *t, bp_dp_config *d);

/* save.c */
bp_status trainer_read_resume_manifest(trainer *t, bp_err *err);
bp_status trainer_resume(trainer *t, bp_err *err);
bp_status trainer_claim_out(trainer *t, bp_err *err);
void trainer_release_out(trainer *t);
bp_status trainer_checkpoint(trainer *t, bp_err *err);
/* After bp_dp_create: this rank's replica state and key (local). */
bp_status trainer_replica_init(trainer *t, bp_err *err);
/* Frees the replica state lists and their host copies. */
void trainer_replica_free(trainer *t);
/* Collective: whether any rank keeps replica state. */
bp_status trainer_replica_agree(trainer *t, bp_err *err);
/* When resuming: the replica file copied back on the grid and options that wrote
 * it; else the consensus model stays, said in one line when state is lost. */
bp_status trainer_resume_replica(trainer *t, bp_err *err);

/* evaluate.c */
bp_status trainer_evaluate(trainer *t, bp_err *err);

#endif
