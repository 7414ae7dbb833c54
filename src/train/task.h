/* What is learned from which data: next-byte prediction on text for gpt,
 * classification of Fashion-MNIST images for mlp. The trainer stays generic: it
 * asks the task for training batches and for the fixed evaluation batches.
 *
 * Every rank draws every global batch from the same generator and keeps the rows
 * of its data-parallel replica (rank, world), so the data stream does not depend
 * on how the batch is split; pipeline stages of one replica see the same rows. */
#ifndef BP_TRAIN_TASK_H
#define BP_TRAIN_TASK_H

#include <stdint.h>

#include "bagpipe/status.h"
#include "data/idx.h"
#include "data/sampler.h"
#include "data/text.h"
#include "nn/model.h"
#include "formats/checkpoint.h"
#include "train/config.h"

typedef struct bp_task {
    bool reads_tokens; /* windows of a text; else samples of an image set */
    int B_global, B_local, T; /* T: positions of a sample (bp_model_sample_len) */
    int width;                /* input floats of a position (bp_model_input_width; 0: tokens) */
    int rank, world;
    int slots; /* batches of a step (gradient accumulation x AvgPipe's own batches) */
    int held;  /* batches held at once: `slots` x the steps of a stream (bp_train_stream_steps) */
    int eval_batches;
    /* gpt */
    bp_text text;
    bp_rng data_rng;
    /* mlp */
    bp_images train, test;
    bp_epoch_sampler sampler;
    int *idx;
    float *images;
    /* batches: `held` of B_local rows each */
    int32_t *tokens, *targets;
} bp_task;

/* rank, world: this replica among the data-parallel replicas. */
bp_status bp_task_init(bp_task *t, const bp_train_config *c, int rank, int world, bp_err *err);
void bp_task_free(bp_task *t);

/* This rank's part (B_local rows) of the next global training batch, held in
 * slot `slot` (0 <= slot < held) until that slot is drawn again. */
void bp_task_next(bp_task *t, int slot, bp_batch *b);

/* The fixed evaluation set (validation windows for gpt: eval_batches x B_global of
 * them, whatever the number of ranks; the test images for mlp) in batches of at most
 * `rows` rows (rows <= B_local): how many batches, and batch i (held in slot 0). */
int bp_task_eval_count(const bp_task *t, int rows);
void bp_task_eval_batch(bp_task *t, int i, int rows, bp_batch *b);

/* Tokens (gpt) or samples (mlp) in one global batch, for throughput. */
int64_t bp_task_items_per_step(const bp_task *t);

void bp_task_get_state(const bp_task *t, bp_resume_state *rs);
/* Continue the data stream from a checkpoint's state; a position outside the data
 * set (another data set, or a crafted file) is refused. */
bp_status bp_task_set_state(bp_task *t, const bp_resume_state *rs, bp_err *err);

/* Rows of logits [B, classes] whose largest entry is the label. */
int bp_count_correct(const bp_real *logits, const int32_t *labels, int B, int classes);

#endif
