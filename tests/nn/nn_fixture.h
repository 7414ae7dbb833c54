/* Model configurations and deterministic batches shared by the nn/ tests (and by the
 * double-precision helper of the float test, which must see the very same inputs). */
#ifndef BP_TESTS_NN_FIXTURE_H
#define BP_TESTS_NN_FIXTURE_H

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/rng.h"
#include "nn/model.h"

/* Small enough for a gradient check of every parameter in a fraction of a second. */
static inline bp_model_config fx_gpt_small(void) {
    return (bp_model_config){
        .kind = BP_MODEL_GPT, .vocab = 32, .n_layer = 2, .n_embd = 16, .n_head = 2, .seq_len = 8};
}
/* The trainer's default gpt (docs/ARCHITECTURE.md#models, issue 2). */
static inline bp_model_config fx_gpt_default(void) {
    return (bp_model_config){.kind = BP_MODEL_GPT,
                             .vocab = 256,
                             .n_layer = 4,
                             .n_embd = 128,
                             .n_head = 4,
                             .seq_len = 64};
}
static inline bp_model_config fx_mlp_small(void) {
    return (bp_model_config){
        .kind = BP_MODEL_MLP, .in_dim = 12, .hidden = 8, .n_hidden = 2, .n_class = 5};
}
static inline bp_model_config fx_mlp_default(void) {
    return (bp_model_config){
        .kind = BP_MODEL_MLP, .in_dim = 784, .hidden = 256, .n_hidden = 2, .n_class = 10};
}

/* One micro-batch with its storage. gpt: random tokens and targets [B,T]; mlp: images
 * [B, in_dim] uniform in [0, 1) like scaled pixels, targets [B]. */
typedef struct fx_batch {
    bp_batch b;
    int32_t *tokens, *targets;
    float *images;
} fx_batch;

static inline void fx_batch_make(fx_batch *f, const bp_model_config *c, int B, int T,
                                 uint64_t seed) {
    bp_rng r;
    bp_rng_seed(&r, seed, 7);
    bool gpt = c->kind == BP_MODEL_GPT;
    size_t rows = (size_t)B * (gpt ? T : 1), npix = gpt ? 1 : (size_t)B * c->in_dim;
    int classes = gpt ? c->vocab : c->n_class;
    f->tokens = malloc(rows * sizeof *f->tokens);
    f->targets = malloc(rows * sizeof *f->targets);
    f->images = malloc(npix * sizeof *f->images);
    for (size_t i = 0; i < rows; i++) {
        f->tokens[i] = (int32_t)bp_rng_below(&r, (uint64_t)(gpt ? c->vocab : 1));
        f->targets[i] = (int32_t)bp_rng_below(&r, (uint64_t)classes);
    }
    for (size_t i = 0; i < npix; i++) f->images[i] = (float)bp_rng_uniform(&r);
    f->b = (bp_batch){
        .B = B, .T = gpt ? T : 1, .tokens = f->tokens, .targets = f->targets, .images = f->images};
}

static inline void fx_batch_free(fx_batch *f) {
    free(f->tokens);
    free(f->targets);
    free(f->images);
}

/* The cases on which the float build is compared with the double build: small and
 * default sizes of both models. Returns false past the last case. */
static inline bool fx_case(int i, bp_model_config *cfg, int *B, int *T) {
    switch (i) {
    case 0:
        *cfg = fx_gpt_small(), *B = 2, *T = 8;
        return true;
    case 1:
        *cfg = fx_gpt_default(), *B = 2, *T = 64;
        return true;
    case 2:
        *cfg = fx_mlp_small(), *B = 4, *T = 1;
        return true;
    case 3:
        *cfg = fx_mlp_default(), *B = 16, *T = 1;
        return true;
    default:
        return false;
    }
}

/* Loss and gradient L2 norm of case i from the default initialization (seed 1234),
 * in whatever precision bp_real has; returns a status. */
static inline int fx_run_case(int i, double *loss, double *gnorm) {
    bp_model_config cfg;
    int B, T, rc;
    if (!fx_case(i, &cfg, &B, &T)) return BP_EUSAGE;
    bp_model *m = NULL;
    bp_acts *a = NULL;
    fx_batch fb;
    fx_batch_make(&fb, &cfg, B, T, 77);
    rc = bp_model_create(&cfg, 0, -1, &m, NULL);
    if (!rc) rc = bp_acts_create(m, B, T, &a, NULL);
    if (!rc) {
        bp_model_init_weights(m, 1234);
        rc = bp_model_forward(m, a, &fb.b, NULL, loss, NULL);
    }
    if (!rc) rc = bp_model_backward(m, a, &fb.b, NULL, NULL, 1, NULL);
    if (!rc) {
        double s = 0;
        for (size_t k = 0; k < bp_model_num_params(m); k++)
            s += (double)bp_model_grads(m)[k] * bp_model_grads(m)[k];
        *gnorm = sqrt(s);
    }
    bp_acts_destroy(a);
    bp_model_destroy(m);
    fx_batch_free(&fb);
    return rc;
}

#endif
