/* Times one training step (forward + backward, no optimizer) of the default gpt
 * (L=4, C=128, heads=4, T=64, B=16) and mlp (784-256-256-10, B=64) on one thread and
 * prints the median over many steps, with the activation and workspace memory.
 *
 *   bench_nn_step [steps]   (default 50 for gpt; mlp runs 20x as many) */
#include <stdio.h>
#include <stdlib.h>

#include "core/blas.h"
#include "core/rng.h"
#include "core/timer.h"
#include "nn/model.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Random tokens/targets or pixels for one micro-batch. */
static void fill_batch(bp_batch *b, const bp_model_config *c, int32_t *ids, int32_t *tgt,
                       float *img) {
    bp_rng r;
    bp_rng_seed(&r, 1, 0);
    bool gpt = c->kind == BP_MODEL_GPT;
    for (int i = 0; i < b->B * b->T; i++) {
        ids[i] = (int32_t)bp_rng_below(&r, gpt ? (uint64_t)c->vocab : 1);
        tgt[i] = (int32_t)bp_rng_below(&r, (uint64_t)(gpt ? c->vocab : c->n_class));
    }
    for (int i = 0; !gpt && i < b->B * c->in_dim; i++) img[i] = (float)bp_rng_uniform(&r);
    b->tokens = ids;
    b->targets = tgt;
    b->images = img;
}

static int bench(const char *name, bp_model_config cfg, int B, int T, int steps) {
    bp_model *m;
    bp_acts *a;
    bp_err err;
    if (bp_model_create(&cfg, 0, -1, &m, &err) || bp_acts_create(m, B, T, &a, &err)) {
        fprintf(stderr, "%s: %s\n", name, err.msg);
        return 1;
    }
    bp_model_init_weights(m, 1234);
    int32_t *ids = malloc(sizeof *ids * B * T), *tgt = malloc(sizeof *tgt * B * T);
    float *img = malloc(sizeof *img * B * (cfg.in_dim > 0 ? cfg.in_dim : 1));
    bp_batch b = {.B = B, .T = T};
    fill_batch(&b, &cfg, ids, tgt, img);
    double *t = malloc(sizeof *t * steps), loss = 0;
    int rc = 0;
    for (int s = -steps / 10 - 1; s < steps && !rc; s++) { /* first tenth warms up */
        double t0 = bp_now();
        bp_model_zero_grad(m);
        rc = bp_model_forward(m, a, &b, NULL, &loss, &err);
        if (!rc) rc = bp_model_backward(m, a, &b, NULL, NULL, 1, &err);
        if (s >= 0) t[s] = bp_now() - t0;
    }
    if (rc) fprintf(stderr, "%s: %s\n", name, err.msg);
    qsort(t, (size_t)steps, sizeof *t, cmp_double);
    printf("%-4s B=%-3d T=%-3d params %8zu  step %8.3f ms (median of %d, min %.3f)  "
           "activations %.2f MB  workspace %.2f MB  loss %.4f\n",
           name, B, T, bp_model_num_params(m), t[steps / 2] * 1e3, steps, t[0] * 1e3,
           bp_acts_bytes(a) / 1e6, bp_model_workspace_bytes(m) / 1e6, loss);
    free(t);
    free(ids);
    free(tgt);
    free(img);
    bp_acts_destroy(a);
    bp_model_destroy(m);
    return rc;
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : 50;
    if (steps < 1) {
        fprintf(stderr, "usage: bench_nn_step [steps >= 1]\n");
        return 2;
    }
    bp_blas_set_threads(1);
    bp_model_config gpt = {.kind = BP_MODEL_GPT,
                           .vocab = 256,
                           .n_layer = 4,
                           .n_embd = 128,
                           .n_head = 4,
                           .seq_len = 64};
    bp_model_config mlp = {
        .kind = BP_MODEL_MLP, .in_dim = 784, .hidden = 256, .n_hidden = 2, .n_class = 10};
    int rc = bench("gpt", gpt, 16, 64, steps);
    rc |= bench("mlp", mlp, 64, 1, 20 * steps);
    return rc ? 1 : 0;
}
