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
    int64_t skipped;      /* of them, dropped for a non-finite value (--skip-nonfinite) */
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
bp_status bp_train_run(const bp_train_config *cfg, bp_comm *world,
                       const volatile sig_atomic_t *stop, bp_train_result *res, bp_err *err);

/* A run inside another command (tune's convergence trial): the first `steps` steps
 * of the configured run (its learning-rate schedule still spans --steps), each
 * evaluation handed to on_eval, which ends the run there by returning false. */
typedef struct bp_train_probe {
    int64_t steps;
    bool (*on_eval)(void *ctx, int64_t step, double loss);
    void *ctx;
} bp_train_probe;

/* bp_train_run as `probe` asks, on a world of one rank, writing nothing: no --out,
 * metrics log, checkpoint or trace. */
bp_status bp_train_probe_run(const bp_train_config *cfg, bp_comm *world,
                             const bp_train_probe *probe, bp_train_result *res, bp_err *err);

/* Every rank of c learns, in one collective, whether a step that each ran on its
 * own (parsing options, loading data) failed on some rank, so that none goes on into
 * collectives the others never join. Returns rc on a rank that failed, else
 * BP_EUSAGE when every failure was a usage error and BP_ECOMM otherwise. After it,
 * err holds a message on the ranks that must print it: those that failed, except
 * that when rank 0 failed too only rank 0 keeps its message (the same configuration
 * error is printed once). *together is set when some rank failed: all end here
 * together, and the job needs no abort. */
bp_status bp_train_agree(bp_comm *c, bp_status rc, bool *together, bp_err *err);

/* Collective, before any other: whether every rank of c was given the same options
 * (after defaults are filled in; paths apart, which name places on each node), so that ranks launched with different ones (an
 * MPMD launch) do not meet in collectives of different sizes. When not, the lowest
 * rank that differs from rank 0 names the first option that does, with both
 * values, and every rank returns BP_EUSAGE (the others with an empty message). */
bp_status bp_train_agree_config(bp_comm *c, const bp_train_config *cfg, bp_err *err);

#endif
