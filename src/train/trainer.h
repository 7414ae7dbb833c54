/* The training loop of one process: data, forward, backward, optimizer step,
 * evaluation, metrics, progress and checkpoints. */
#ifndef BP_TRAIN_TRAINER_H
#define BP_TRAIN_TRAINER_H

#include <stdint.h>

#include "bagpipe/comm.h"
#include "bagpipe/status.h"
#include "train/config.h"

typedef struct bp_train_result {
    int64_t steps;        /* completed optimizer steps */
    double final_loss;    /* training loss of the last step (NaN when no step ran) */
    double val_loss;      /* last evaluation (NaN when none ran) */
    double val_acc;       /* mlp only (NaN otherwise) */
    char checkpoint[BP_PATH_MAX]; /* where the final checkpoint went */
} bp_train_result;

/* Run training as configured on the ranks of `world` (collective); cfg must have
 * been finalized and checked against the world size. Rank 0 prints progress,
 * writes the metrics log and checkpoints. When setup fails on any rank, every rank
 * returns an error: BP_OK never comes back to some ranks only. */
int bp_train_run(const bp_train_config *cfg, bp_comm *world, bp_train_result *res, bp_err *err);

#endif
