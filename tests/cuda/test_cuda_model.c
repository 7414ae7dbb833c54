/* gpt on the cuda backend (bp_model_set_device with nn/cuda/model_cuda.h's bp_gpt_cuda)
 * against the CPU gpt (nn/model.h), same weights and batches, through bp_model_forward
 * and bp_model_backward as the step calls them:
 *   - whole model: loss and every tensor's gradient within 1e-4 relative (fp32);
 *   - two pipeline stages, the boundary activation and its gradient passed on the
 *     device: each stage's gradients as the CPU stages'; two micro-batches in flight
 *     (each bp_acts holds its own);
 *   - a gradient hook sees every block once, the head first and block 0 last;
 *   - bf16 mixed precision: loss and gradient norm within bf16's tolerance;
 *   - 40 AdamW steps on the GPU (the cuda backend's norm, clipping and update) and on
 *     the CPU: the same losses (1e-3 relative at
 *     every step), and the trained weights and optimizer state copied to the host are
 *     the CPU's within 5e-3, so checkpoints are interchangeable.
 * Skipped (77) without a GPU. */
#include "core/cuda/backend_cuda.h"
#include "cuda_test.h"
#include "nn/cuda/model_cuda.h"
#include "nn/model.h"
#include "nn/optim.h"

enum { B = 4, T = 32 };

static int failures;
static const bp_model_config CFG = {.kind = BP_MODEL_GPT, .vocab = 256, .n_layer = 2,
                                    .n_embd = 64, .n_head = 4, .seq_len = T};

static bp_model *cpu_model(int begin, int end) {
    bp_model *m;
    bp_err err = {0};
    cu_ok(bp_model_create(&CFG, begin, end, &m, &err), &err);
    bp_model_init_weights(m, 1234);
    return m;
}

/* A batch of bytes of a fixed text, shifted by `step`, targets the next bytes. */
static void make_batch(int step, int32_t *tok, int32_t *tgt, bp_batch *b) {
    static const char text[] = "In the beginning God created the heaven and the earth. And the "
                               "earth was without form, and void; and darkness was upon the face "
                               "of the deep. And the Spirit of God moved upon the face of the "
                               "waters. And God said, Let there be light: and there was light.";
    size_t len = sizeof text - 1;
    for (int i = 0; i < B * T; i++) {
        size_t at = ((size_t)step * 13 + (size_t)(i / T) * 41 + (size_t)(i % T)) % (len - 1);
        tok[i] = (unsigned char)text[at];
        tgt[i] = (unsigned char)text[at + 1];
    }
    *b = (bp_batch){.B = B, .T = T, .tokens = tok, .targets = tgt};
}

/* The cuda backend every GPU model of the test lives on. */
static bp_backend *be;

static float *host_copy(const float *dev, size_t n) {
    float *h = cu_host(n);
    bp_backend_get(be, h, dev, n);
    return h;
}

/* Every tensor's gradient of the GPU model against the CPU model's. */
static void compare_grads(const char *what, bp_model *g, bp_model *cpu, bp_cuda_dtype dt) {
    float *grads = host_copy(bp_model_grads(g), bp_model_num_params(g));
    for (int i = 0; i < bp_model_num_tensors(cpu); i++) {
        const bp_tensor_info *t = bp_model_tensor(cpu, i);
        char name[128];
        snprintf(name, sizeof name, "%s d%s", what, t->name);
        failures +=
            cu_check(name, dt, grads + t->offset, bp_model_grads(cpu) + t->offset, t->numel);
    }
    free(grads);
}

/* The same block range on the CPU and on the GPU, from the same weights, each with
 * activations for one micro-batch. */
typedef struct twins {
    bp_model *cpu, *gpu;
    bp_acts *a, *ga;
} twins;

static twins twins_make(int begin, int end, bool bf16) {
    bp_err err = {0};
    twins t = {cpu_model(begin, end), cpu_model(begin, end), NULL, NULL};
    cu_ok(bp_model_set_device(t.gpu, be, &bp_gpt_cuda, bf16, &err), &err);
    cu_ok(bp_acts_create(t.cpu, B, T, &t.a, &err), &err);
    cu_ok(bp_acts_create(t.gpu, B, T, &t.ga, &err), &err);
    bp_model_zero_grad(t.cpu);
    bp_model_zero_grad(t.gpu);
    return t;
}

static void twins_free(twins *t) {
    bp_acts_destroy(t->ga);
    bp_acts_destroy(t->a);
    bp_model_destroy(t->gpu);
    bp_model_destroy(t->cpu);
}

/* Forward and backward of the whole model, on the CPU and on the GPU. */
static void both_steps(twins *t, const bp_batch *b, double *lc, double *lg) {
    bp_err err = {0};
    cu_ok(bp_model_forward(t->cpu, t->a, b, NULL, lc, &err), &err);
    cu_ok(bp_model_backward(t->cpu, t->a, b, NULL, NULL, 1, &err), &err);
    cu_ok(bp_model_forward(t->gpu, t->ga, b, NULL, lg, &err), &err);
    cu_ok(bp_model_backward(t->gpu, t->ga, b, NULL, NULL, 1, &err), &err);
}

/* Records the order of the gradient hook's blocks. */
typedef struct hook_log {
    int blocks[16], n;
} hook_log;

static void on_block(void *ctx, int block) {
    hook_log *h = ctx;
    if (h->n < 16) h->blocks[h->n] = block;
    h->n++;
}

static void whole_model(void) {
    twins t = twins_make(0, -1, false);
    hook_log h = {.n = 0};
    bp_model_set_grad_hook(t.gpu, on_block, &h);
    int32_t tok[B * T], tgt[B * T];
    bp_batch b;
    make_batch(0, tok, tgt, &b);
    double lc, lg;
    both_steps(&t, &b, &lc, &lg);
    float fc = (float)lc, fg = (float)lg;
    failures += cu_check("gpt loss", BP_CUDA_F32, &fg, &fc, 1);
    compare_grads("gpt", t.gpu, t.cpu, BP_CUDA_F32);
    int nb = bp_model_num_blocks(&CFG), bad = h.n != nb;
    for (int i = 0; !bad && i < nb; i++) bad = h.blocks[i] != nb - 1 - i;
    printf("gradient hook: %d blocks, head first, block 0 last%s\n", h.n, bad ? "  FAIL" : "");
    failures += bad;
    /* the logits as bp_acts_logits gives them: fp32 on the device */
    size_t NV = (size_t)B * T * CFG.vocab;
    float *lgt = host_copy(bp_acts_logits(t.ga), NV);
    failures += cu_check("gpt logits", BP_CUDA_F32, lgt, bp_acts_logits(t.a), NV);
    free(lgt);
    /* bf16: the loss and the norm of the whole gradient */
    twins h16 = twins_make(0, -1, true);
    both_steps(&h16, &b, &lc, &lg);
    fg = (float)lg;
    failures += cu_check("gpt loss", BP_CUDA_BF16, &fg, &fc, 1);
    size_t n = bp_model_num_params(t.cpu);
    float nc = (float)sqrt(bp_grad_sumsq(bp_model_grads(h16.cpu), n)),
          ng = (float)sqrt(be->sumsq(be, bp_model_grads(h16.gpu), n));
    failures += cu_check("gpt gradient norm", BP_CUDA_BF16, &ng, &nc, 1);
    twins_free(&h16);
    twins_free(&t);
}

/* Stages [0, 2) and [2, 4) of the 4 blocks (embed, h.0 | h.1, head), two micro-batches
 * forward before either backward, as GPipe runs them. */
static void pipeline(void) {
    bp_err err = {0};
    twins st[2] = {twins_make(0, 2, false), twins_make(2, -1, false)};
    bp_acts *second[2], *gsecond[2];
    for (int s = 0; s < 2; s++) {
        cu_ok(bp_acts_create(st[s].cpu, B, T, &second[s], &err), &err);
        cu_ok(bp_acts_create(st[s].gpu, B, T, &gsecond[s], &err), &err);
    }
    int32_t tok[2][B * T], tgt[2][B * T];
    bp_batch b[2];
    make_batch(1, tok[0], tgt[0], &b[0]);
    make_batch(2, tok[1], tgt[1], &b[1]);
    size_t NC = (size_t)B * T * CFG.n_embd;
    float *dx = cu_host(NC), *gdx;
    cu_ok(be->alloc(be, (void **)&gdx, NC * sizeof *gdx, "boundary gradient", &err), &err);
    double lc[2], lg[2];
    bp_acts *ac[2][2] = {{st[0].a, st[1].a}, {second[0], second[1]}};
    bp_acts *ag[2][2] = {{st[0].ga, st[1].ga}, {gsecond[0], gsecond[1]}};
    for (int k = 0; k < 2; k++) {
        cu_ok(bp_model_forward(st[0].cpu, ac[k][0], &b[k], NULL, NULL, &err), &err);
        cu_ok(bp_model_forward(st[1].cpu, ac[k][1], &b[k], bp_acts_output(ac[k][0]), &lc[k], &err),
              &err);
        cu_ok(bp_model_forward(st[0].gpu, ag[k][0], &b[k], NULL, NULL, &err), &err);
        cu_ok(bp_model_forward(st[1].gpu, ag[k][1], &b[k], bp_acts_output(ag[k][0]), &lg[k], &err),
              &err);
    }
    for (int k = 1; k >= 0; k--) {
        cu_ok(bp_model_backward(st[1].cpu, ac[k][1], &b[k], NULL, dx, 1, &err), &err);
        cu_ok(bp_model_backward(st[0].cpu, ac[k][0], &b[k], dx, NULL, 1, &err), &err);
        cu_ok(bp_model_backward(st[1].gpu, ag[k][1], &b[k], NULL, gdx, 1, &err), &err);
        cu_ok(bp_model_backward(st[0].gpu, ag[k][0], &b[k], gdx, NULL, 1, &err), &err);
    }
    for (int k = 0; k < 2; k++) {
        float fc = (float)lc[k], fg = (float)lg[k];
        failures += cu_check("2 stages: loss", BP_CUDA_F32, &fg, &fc, 1);
    }
    float *hdx = host_copy(gdx, NC);
    failures += cu_check("2 stages: boundary gradient", BP_CUDA_F32, hdx, dx, NC);
    compare_grads("stage 0", st[0].gpu, st[0].cpu, BP_CUDA_F32);
    compare_grads("stage 1", st[1].gpu, st[1].cpu, BP_CUDA_F32);
    for (int s = 0; s < 2; s++) {
        bp_acts_destroy(second[s]);
        bp_acts_destroy(gsecond[s]);
        twins_free(&st[s]);
    }
    free(hdx);
    free(dx);
    be->free(be, gdx);
}

/* 40 steps of clipping and AdamW, the optimizer on each model's backend. */
static void training(void) {
    enum { STEPS = 40 };
    bp_err err = {0};
    twins t = twins_make(0, -1, false);
    bp_optim_config oc = {.kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    size_t n = bp_model_num_params(t.cpu);
    bp_optim o, go;
    cu_ok(bp_optim_init(&o, &oc, n, &err), &err);
    cu_ok(bp_optim_init_on(&go, &oc, n, be, &err), &err);
    float lc[STEPS], lg[STEPS];
    for (int s = 0; s < STEPS; s++) {
        int32_t tok[B * T], tgt[B * T];
        bp_batch b;
        make_batch(s, tok, tgt, &b);
        double l, m;
        bp_model_zero_grad(t.cpu);
        bp_model_zero_grad(t.gpu);
        both_steps(&t, &b, &m, &l);
        bp_clip_grad_norm(bp_model_grads(t.cpu), n, 1.0);
        bp_optim_step(&o, bp_model_params(t.cpu), bp_model_grads(t.cpu), 1e-3);
        lc[s] = (float)m;
        float *g = bp_model_grads(t.gpu);
        double norm = sqrt(be->sumsq(be, g, n));
        if (norm > 1.0) be->scale(be, g, n, (float)(1.0 / (norm + 1e-6)));
        bp_optim_step(&go, bp_model_params(t.gpu), g, 1e-3);
        lg[s] = (float)l;
    }
    double worst = 0;
    for (int s = 0; s < STEPS; s++) worst = fmax(worst, fabs(lg[s] - lc[s]) / lc[s]);
    printf("fp32 training: loss %.4f -> %.4f (CPU %.4f -> %.4f), worst step rel %.2e%s\n", lg[0],
           lg[STEPS - 1], lc[0], lc[STEPS - 1], worst, worst <= 1e-3 ? "" : "  FAIL");
    failures += !(worst <= 1e-3) + !(lg[STEPS - 1] < lg[0] - 0.5f);
    failures += go.t != o.t;
    /* AdamW divides by sqrt(v): where a gradient is tiny, float rounding moves a weight
     * by up to lr a step; the bound allows a few such steps. */
    const double tol = 5e-3;
    float *p = host_copy(bp_model_params(t.gpu), n), *m = host_copy(go.m, n),
          *v = host_copy(go.v, n);
    double ep = cu_rel(p, bp_model_params(t.cpu), n);
    double em = cu_rel(m, o.m, n), ev = cu_rel(v, o.v, n);
    printf("trained weights rel %.2e, moments rel %.2e %.2e (tol %.0e)\n", ep, em, ev, tol);
    failures += !(ep <= tol) + !(em <= tol) + !(ev <= tol);
    free(p), free(m), free(v);
    bp_optim_free(&go);
    bp_optim_free(&o);
    twins_free(&t);
}

/* What the GPU gpt cannot do yet is refused before anything moves, with one line. */
static void refusals(void) {
    bp_err err = {0};
    bp_model *m = cpu_model(2, -1);
    int rc = bp_model_set_device(m, be, &bp_gpt_cuda, true, &err);
    printf("bf16 on a pipeline stage refused: %s%s\n", err.msg, rc == BP_EUSAGE ? "" : "  FAIL");
    failures += rc != BP_EUSAGE || bp_model_backend(m) != bp_backend_cpu();
    bp_model_destroy(m);
}

int main(void) {
    cu_require_gpu();
    bp_cuda *c = cu_context();
    bp_err err = {0};
    cu_ok(bp_backend_cuda_create(c, &be, &err), &err);
    whole_model();
    pipeline();
    training();
    refusals();
    cu_ok(bp_cuda_sync(c, "the test's kernels", &err), &err);
    bp_backend_cuda_destroy(be);
    bp_cuda_destroy(c);
    printf("%d comparison(s) failed\n", failures);
    return failures ? 1 : 0;
}
