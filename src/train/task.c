#include "train/task.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"

/* Stream of the data-order generator, apart from the streams of weight init. */
#define DATA_STREAM 0x64617461ull

static int init_text(bp_task *t, const bp_train_config *c, bp_err *err) {
    int rc = bp_text_load(c->data, c->cache_dir, &t->text, err);
    if (rc == BP_OK) rc = bp_text_check_seq_len(&t->text, c->data, c->seq_len, err);
    bp_rng_seed(&t->data_rng, (uint64_t)c->seed, DATA_STREAM);
    return rc;
}

static int init_images(bp_task *t, const bp_train_config *c, bp_err *err) {
    int rc = bp_fashion_load(c->data, 1, &t->train, err);
    if (rc == BP_OK) rc = bp_fashion_load(c->data, 0, &t->test, err);
    if (rc == BP_OK && t->train.rows * t->train.cols != 784)
        rc = bp_fail(err, BP_EFORMAT, "data %s: images are %dx%d, mlp expects 28x28", c->data,
                     t->train.rows, t->train.cols);
    if (rc == BP_OK && t->B_global > t->train.n)
        rc = bp_fail(err, BP_EUSAGE, "option --batch: %d is larger than the %d training images",
                     t->B_global, t->train.n);
    if (rc == BP_OK) rc = bp_epoch_sampler_init(&t->sampler, t->train.n, (uint64_t)c->seed, err);
    if (rc == BP_OK)
        rc = bp_alloc_checked((void **)&t->images, (size_t)t->B_local * 784 * sizeof(float),
                              "image batch", err);
    if (rc == BP_OK)
        rc = bp_alloc_checked((void **)&t->idx, (size_t)t->B_local * sizeof(int), "batch", err);
    return rc;
}

int bp_task_init(bp_task *t, const bp_train_config *c, int rank, int world, bp_err *err) {
    memset(t, 0, sizeof *t);
    t->kind = (bp_model_kind)c->model;
    t->rank = rank;
    t->world = world;
    t->B_global = c->batch;
    t->B_local = c->batch / world;
    t->T = t->kind == BP_MODEL_GPT ? c->seq_len : 1;
    t->eval_batches = c->eval_batches;
    size_t n = (size_t)t->B_local * (size_t)t->T * sizeof(int32_t);
    int rc = bp_alloc_checked((void **)&t->tokens, n, "token batch", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&t->targets, n, "target batch", err);
    if (rc == BP_OK && (rc = t->kind == BP_MODEL_GPT ? init_text(t, c, err) : init_images(t, c, err)))
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

/* Rows [first, first+n) of an image set as a batch. */
static void image_rows(bp_task *t, const bp_images *im, const int *idx, int first, int n,
                       bp_batch *b) {
    for (int i = 0; i < n; i++) {
        int k = idx ? idx[i] : first + i;
        memcpy(t->images + (size_t)i * 784, im->pixels + (size_t)k * 784, 784 * sizeof(float));
        t->targets[i] = im->labels[k];
    }
    *b = (bp_batch){.B = n, .T = 1, .images = t->images, .targets = t->targets};
}

void bp_task_next(bp_task *t, bp_batch *b) {
    if (t->kind == BP_MODEL_GPT) {
        bp_text_train_batch(&t->text, &t->data_rng, t->B_global, t->T, t->rank, t->world,
                            t->tokens, t->targets);
        *b = (bp_batch){.B = t->B_local, .T = t->T, .tokens = t->tokens, .targets = t->targets};
        return;
    }
    bp_epoch_sampler_next(&t->sampler, t->B_global, t->rank, t->world, t->idx);
    image_rows(t, &t->train, t->idx, 0, t->B_local, b);
}

static int argmax_correct(const bp_real *logits, const int32_t *labels, int B, int classes) {
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

static int eval_images(bp_task *t, bp_model *m, bp_acts *a, double *loss, double *acc,
                       bp_err *err) {
    double sum = 0;
    int correct = 0;
    for (int first = 0; first < t->test.n; first += t->B_local) {
        int n = t->test.n - first < t->B_local ? t->test.n - first : t->B_local;
        bp_batch b;
        double l;
        image_rows(t, &t->test, NULL, first, n, &b);
        int rc = bp_model_forward(m, a, &b, NULL, &l, err);
        if (rc) return rc;
        sum += l * n;
        correct += argmax_correct(bp_acts_logits(a), t->targets, n, 10);
    }
    *loss = sum / t->test.n;
    *acc = (double)correct / t->test.n;
    return BP_OK;
}

/* The fixed validation windows are eval_batches x B_global, whatever the number
 * of ranks, evaluated B_local at a time (the size the activations were made for). */
static int eval_text(bp_task *t, bp_model *m, bp_acts *a, double *loss, bp_err *err) {
    int n_windows = t->eval_batches * t->B_global;
    double sum = 0;
    for (int first = 0; first < n_windows; first += t->B_local) {
        int rows = n_windows - first < t->B_local ? n_windows - first : t->B_local;
        for (int row = 0; row < rows; row++)
            bp_text_val_window(&t->text, first + row, n_windows, t->T,
                               t->tokens + (size_t)row * t->T, t->targets + (size_t)row * t->T);
        bp_batch b = {.B = rows, .T = t->T, .tokens = t->tokens, .targets = t->targets};
        double l;
        int rc = bp_model_forward(m, a, &b, NULL, &l, err);
        if (rc) return rc;
        sum += l * rows;
    }
    *loss = sum / n_windows;
    return BP_OK;
}

int bp_task_eval(bp_task *t, bp_model *m, bp_acts *a, double *loss, double *accuracy,
                 bp_err *err) {
    *accuracy = NAN;
    if (t->kind == BP_MODEL_GPT) return eval_text(t, m, a, loss, err);
    return eval_images(t, m, a, loss, accuracy, err);
}

int64_t bp_task_items_per_step(const bp_task *t) { return (int64_t)t->B_global * t->T; }

void bp_task_get_state(const bp_task *t, bp_resume_state *rs) {
    rs->data_rng = t->data_rng;
    rs->epoch = t->sampler.epoch;
    rs->pos = t->sampler.pos;
}

void bp_task_set_state(bp_task *t, const bp_resume_state *rs) {
    t->data_rng = rs->data_rng;
    if (t->kind == BP_MODEL_MLP) bp_epoch_sampler_seek(&t->sampler, rs->epoch, (int)rs->pos);
}
