/* The training loop of one process: data, forward, backward, optimizer step,
 * evaluation, metrics, progress and checkpoints. */
#ifndef BP_TRAIN_TRAINER_H
#define BP_TRAIN_TRAINER_H

#include <signal.h>
#include <stdbool.h>
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
    /* Every rank stopped at the same point (a signal, a non-finite value, a failed
     * start): no rank is left inside a collective, so the job needs no abort. */
    bool stopped_together;
} bp_train_result;

/* Run training as configured on the ranks of `world` (collective); cfg must have
 * been finalized and checked against the world size. Rank 0 prints progress,
 * writes the metrics log and checkpoints. When setup fails on any rank, every rank
 * returns an error: BP_OK never comes back to some ranks only.
 *
 * *stop (set by a signal handler) asks to stop: the ranks agree after every step,
 * so all stop after the same step, save a checkpoint and return BP_EINTERRUPTED.
 * When the failure was found by another rank, err's message is empty: that rank
 * reports it. */
int bp_train_run(const bp_train_config *cfg, bp_comm *world, const volatile sig_atomic_t *stop,
                 bp_train_result *res, bp_err *err);

#endif
