/* What is learned from which data: next-byte prediction on text for gpt,
 * classification of Fashion-MNIST images for mlp. The trainer stays generic: it
 * asks the task for the next training batch and for an evaluation. */
#ifndef BP_TRAIN_TASK_H
#define BP_TRAIN_TASK_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "data/idx.h"
#include "data/sampler.h"
#include "data/text.h"
#include "nn/model.h"
#include "train/checkpoint.h"
#include "train/config.h"

typedef struct bp_task {
    bp_model_kind kind;
    int B_global, B_local, T;
    int rank, world;
    int eval_batches;
    /* gpt */
    bp_text text;
    bp_rng data_rng;
    /* mlp */
    bp_images train, test;
    bp_epoch_sampler sampler;
    int *idx;
    float *images;
    /* the current batch */
    int32_t *tokens, *targets;
} bp_task;

int bp_task_init(bp_task *t, const bp_train_config *c, int rank, int world, bp_err *err);
void bp_task_free(bp_task *t);

/* This rank's part of the next global training batch. */
void bp_task_next(bp_task *t, bp_batch *b);

/* Mean loss (and accuracy for classification; NaN for gpt) of model m on the fixed
 * evaluation set, using activations a (sized for B_local x T). */
int bp_task_eval(bp_task *t, bp_model *m, bp_acts *a, double *loss, double *accuracy,
                 bp_err *err);

/* Tokens (gpt) or samples (mlp) in one global batch, for throughput. */
int64_t bp_task_items_per_step(const bp_task *t);

void bp_task_get_state(const bp_task *t, bp_resume_state *rs);
void bp_task_set_state(bp_task *t, const bp_resume_state *rs);

#endif
