/* The training loop of one process: data, forward, backward, optimizer step,
 * evaluation, metrics, progress and checkpoints. */
#ifndef BP_TRAIN_TRAINER_H
#define BP_TRAIN_TRAINER_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "train/config.h"

typedef struct bp_train_result {
    int64_t steps;        /* completed optimizer steps */
    double final_loss;    /* training loss of the last step (NaN when no step ran) */
    double val_loss;      /* last evaluation (NaN when none ran) */
    double val_acc;       /* mlp only (NaN otherwise) */
    char checkpoint[BP_PATH_MAX]; /* where the final checkpoint went */
} bp_train_result;

/* Run training as configured; cfg must have been finalized. */
int bp_train_run(const bp_train_config *cfg, bp_train_result *res, bp_err *err);

#endif
