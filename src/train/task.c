#include "train/task.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

/* Stream of the data-order generator, apart from the streams of weight init. */
#define DATA_STREAM 0x64617461ull

static bp_status init_text(bp_task *t, const bp_train_config *c, bp_err *err) {
    bp_status rc = bp_text_load(c->data.spec, c->data.cache_dir, &t->text, err);
    if (rc == BP_OK) rc = bp_text_check_seq_len(&t->text, c->data.spec, c->shape.seq_len, err);
    bp_rng_seed(&t->data_rng, (uint64_t)c->seed, DATA_STREAM);
    return rc;
}

static bp_status init_images(bp_task *t, const bp_train_config *c, bp_err *err) {
    bp_status rc = bp_fashion_load(c->data.spec, 1, &t->train, err);
    if (rc == BP_OK) rc = bp_fashion_load(c->data.spec, 0, &t->test, err);
    if (rc == BP_OK && t->train.rows * t->train.cols != t->width)
        rc = bp_fail(err, BP_EFORMAT, "data %s: images are %dx%d, mlp expects %d pixels",
                     c->data.spec,
                     t->train.rows, t->train.cols, t->width);
    if (rc == BP_OK && t->B_global > t->train.n)
        rc = bp_fail(err, BP_EUSAGE, "option --batch: %d is larger than the %d training images",
                     t->B_global, t->train.n);
    if (rc == BP_OK) rc = bp_epoch_sampler_init(&t->sampler, t->train.n, (uint64_t)c->seed, err);
    if (rc == BP_OK)
        rc = bp_alloc_checked((void **)&t->images,
                              (size_t)t->held * (size_t)t->B_local * (size_t)t->width *
                                  sizeof(float),
                              "image batch", err);
    if (rc == BP_OK)
        rc = bp_alloc_checked((void **)&t->idx, (size_t)t->B_local * sizeof(int), "batch", err);
    return rc;
}

bp_status bp_task_init(bp_task *t, const bp_train_config *c, int rank, int world, bp_err *err) {
    memset(t, 0, sizeof *t);
    t->reads_tokens = bp_model_kind_facts((bp_model_kind)c->model)->reads_tokens;
    t->rank = rank;
    t->world = world;
    t->B_global = c->batch;
    t->B_local = c->batch / world;
    bp_model_config mc;
    bp_train_model_config(c, &mc);
    t->T = bp_model_sample_len(&mc);
    t->width = bp_model_input_width(&mc);
    t->eval_batches = c->eval_batches;
    t->slots = c->grad_accum * bp_train_batches_per_step(c);
    t->held = t->slots * bp_train_stream_steps(c);
    size_t n = (size_t)t->held * (size_t)t->B_local * (size_t)t->T * sizeof(int32_t);
    bp_status rc = bp_alloc_checked((void **)&t->tokens, n, "token batch", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&t->targets, n, "target batch", err);
    if (rc == BP_OK && (rc = t->reads_tokens ? init_text(t, c, err) : init_images(t, c, err)))
        bp_err_context(err, "option --data");
    if (rc) bp_task_free(t);
    return rc;
}

void bp_task_free(bp_task *t) {
    bp_text_free(&t->text);
    bp_images_free(&t->train);
    bp_images_free(&t->test);
    bp_epoch_sampler_free(&t->sampler);
    bp_free(t->idx);
    bp_free(t->images);
    bp_free(t->tokens);
    bp_free(t->targets);
    memset(t, 0, sizeof *t);
}

/* Rows idx[0..n) (or first..first+n when idx is NULL) of an image set as a batch
 * in slot `slot`. */
static void image_rows(bp_task *t, int slot, const bp_images *im, const int *idx, int first,
                       int n, bp_batch *b) {
    size_t w = (size_t)t->width;
    float *images = t->images + (size_t)slot * t->B_local * w;
    int32_t *targets = t->targets + (size_t)slot * t->B_local;
    for (int i = 0; i < n; i++) {
        int k = idx ? idx[i] : first + i;
        const uint8_t *px = im->pixels + (size_t)k * w;
        for (size_t j = 0; j < w; j++) images[(size_t)i * w + j] = (float)px[j] / 255.0f;
        targets[i] = im->labels[k];
    }
    *b = (bp_batch){.B = n, .T = 1, .images = images, .targets = targets};
}

void bp_task_next(bp_task *t, int slot, bp_batch *b) {
    if (t->reads_tokens) {
        size_t at = (size_t)slot * t->B_local * t->T;
        bp_text_train_batch(&t->text, &t->data_rng, t->B_global, t->T, t->rank, t->world,
                            t->tokens + at, t->targets + at);
        *b = (bp_batch){.B = t->B_local, .T = t->T, .tokens = t->tokens + at,
                        .targets = t->targets + at};
        return;
    }
    bp_epoch_sampler_next(&t->sampler, t->B_global, t->rank, t->world, t->idx);
    image_rows(t, slot, &t->train, t->idx, 0, t->B_local, b);
}

int bp_count_correct(const bp_real *logits, const int32_t *labels, int B, int classes) {
    int correct = 0;
    for (int i = 0; i < B; i++) {
        const bp_real *row = logits + (size_t)i * classes;
        int best = 0;
        for (int k = 1; k < classes; k++)
            if (row[k] > row[best]) best = k;
        correct += best == labels[i];
    }
    return correct;
}

static int eval_items(const bp_task *t) {
    return t->reads_tokens ? t->eval_batches * t->B_global : t->test.n;
}

int bp_task_eval_count(const bp_task *t, int rows) { return (eval_items(t) + rows - 1) / rows; }

void bp_task_eval_batch(bp_task *t, int i, int rows, bp_batch *b) {
    int n_items = eval_items(t), first = i * rows;
    int n = n_items - first < rows ? n_items - first : rows;
    if (!t->reads_tokens) {
        image_rows(t, 0, &t->test, NULL, first, n, b);
        return;
    }
    /* Validation windows have fixed starts evenly spaced over the split. */
    for (int row = 0; row < n; row++)
        bp_text_val_window(&t->text, first + row, n_items, t->T, t->tokens + (size_t)row * t->T,
                           t->targets + (size_t)row * t->T);
    *b = (bp_batch){.B = n, .T = t->T, .tokens = t->tokens, .targets = t->targets};
}

int64_t bp_task_items_per_step(const bp_task *t) { return (int64_t)t->B_global * t->T; }

void bp_task_get_state(const bp_task *t, bp_resume_state *rs) {
    rs->data_rng = t->data_rng;
    rs->epoch = t->sampler.epoch;
    rs->pos = t->sampler.pos;
}

bp_status bp_task_set_state(bp_task *t, const bp_resume_state *rs, bp_err *err) {
    t->data_rng = rs->data_rng;
    return t->reads_tokens ? BP_OK
                           : bp_epoch_sampler_restore(&t->sampler, rs->epoch, rs->pos, err);
}
