/* The GPU gpt (nn/cuda/model_cuda.h) against the CPU gpt (nn/model.h), same weights
 * and batches:
 *   - whole model: loss and every tensor's gradient within 1e-4 relative (fp32);
 *   - two pipeline stages, the boundary activation and its gradient passed on the
 *     device: each stage's gradients as the CPU stages';
 *   - bf16 mixed precision: loss and gradient norm within bf16's tolerance;
 *   - 40 AdamW steps on the GPU and on the CPU: the same losses (1e-3 relative at
 *     every step), and the trained weights and optimizer state downloaded into the
 *     host model are the CPU's within 5e-3, so checkpoints are interchangeable.
 * Skipped (77) without a GPU. */
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

/* Every tensor's gradient of the GPU model against the CPU model's. */
static void compare_grads(const char *what, bp_gpu_model *g, bp_model *cpu, bp_cuda_dtype dt) {
    bp_err err = {0};
    bp_model *host = bp_gpu_model_host(g);
    cu_ok(bp_gpu_model_download(g, true, &err), &err);
    for (int i = 0; i < bp_model_num_tensors(cpu); i++) {
        const bp_tensor_info *t = bp_model_tensor(cpu, i);
        char name[128];
        snprintf(name, sizeof name, "%s d%s", what, t->name);
        failures += cu_check(name, dt, bp_model_grads(host) + t->offset,
                             bp_model_grads(cpu) + t->offset, t->numel);
    }
}

/* The same block range on the CPU (cpu, with activations a) and on the GPU (g, whose
 * host mirror is host), from the same weights. */
typedef struct twins {
    bp_model *cpu, *host;
    bp_acts *a;
    bp_gpu_model *g;
} twins;

static twins twins_make(bp_cuda *c, int begin, int end) {
    bp_err err = {0};
    twins t = {cpu_model(begin, end), cpu_model(begin, end), NULL, NULL};
    cu_ok(bp_acts_create(t.cpu, B, T, &t.a, &err), &err);
    cu_ok(bp_gpu_model_create(c, t.host, BP_CUDA_F32, B, T, &t.g, &err), &err);
    bp_model_zero_grad(t.cpu);
    bp_gpu_model_zero_grad(t.g);
    return t;
}

static void twins_free(twins *t) {
    bp_gpu_model_destroy(t->g);
    bp_acts_destroy(t->a);
    bp_model_destroy(t->host);
    bp_model_destroy(t->cpu);
}

/* Forward and backward of the whole model, on the CPU and on the GPU. */
static void both_steps(twins *t, const bp_batch *b, double *lc, double *lg) {
    bp_err err = {0};
    cu_ok(bp_model_forward(t->cpu, t->a, b, NULL, lc, &err), &err);
    cu_ok(bp_model_backward(t->cpu, t->a, b, NULL, NULL, 1, &err), &err);
    cu_ok(bp_gpu_model_forward(t->g, b, NULL, lg, &err), &err);
    cu_ok(bp_gpu_model_backward(t->g, b, NULL, NULL, 1, &err), &err);
}

static void whole_model(bp_cuda *c) {
    bp_err err = {0};
    twins t = twins_make(c, 0, -1);
    bp_model *cpu = t.cpu, *host = t.host;
    int32_t tok[B * T], tgt[B * T];
    bp_batch b;
    make_batch(0, tok, tgt, &b);
    double lc, lg;
    both_steps(&t, &b, &lc, &lg);
    float fc = (float)lc, fg = (float)lg;
    failures += cu_check("gpt loss", BP_CUDA_F32, &fg, &fc, 1);
    compare_grads("gpt", t.g, cpu, BP_CUDA_F32);
    /* bf16: the loss and the norm of the whole gradient */
    bp_gpu_model *h;
    cu_ok(bp_gpu_model_create(c, host, BP_CUDA_BF16, B, T, &h, &err), &err);
    bp_gpu_model_zero_grad(h);
    cu_ok(bp_gpu_model_forward(h, &b, NULL, &lg, &err), &err);
    cu_ok(bp_gpu_model_backward(h, &b, NULL, NULL, 1, &err), &err);
    cu_ok(bp_gpu_model_download(h, true, &err), &err);
    fg = (float)lg;
    failures += cu_check("gpt loss", BP_CUDA_BF16, &fg, &fc, 1);
    size_t n = bp_model_num_params(cpu);
    float nc = (float)sqrt(bp_grad_sumsq(bp_model_grads(cpu), n)),
          ng = (float)sqrt(bp_grad_sumsq(bp_model_grads(host), n));
    failures += cu_check("gpt gradient norm", BP_CUDA_BF16, &ng, &nc, 1);
    bp_gpu_model_destroy(h);
    twins_free(&t);
}

/* Stages [0, 2) and [2, 4) of the 4 blocks (embed, h.0 | h.1, head). */
static void pipeline(bp_cuda *c) {
    bp_err err = {0};
    twins st[2] = {twins_make(c, 0, 2), twins_make(c, 2, -1)};
    bp_model *cs[2] = {st[0].cpu, st[1].cpu};
    bp_acts *as[2] = {st[0].a, st[1].a};
    bp_gpu_model *gs[2] = {st[0].g, st[1].g};
    int32_t tok[B * T], tgt[B * T];
    bp_batch b;
    make_batch(1, tok, tgt, &b);
    size_t NC = (size_t)B * T * CFG.n_embd;
    float *dx = cu_host(NC), *gdx = cu_up32(c, NULL, NC);
    double lc, lg;
    cu_ok(bp_model_forward(cs[0], as[0], &b, NULL, NULL, &err), &err);
    cu_ok(bp_model_forward(cs[1], as[1], &b, bp_acts_output(as[0]), &lc, &err), &err);
    cu_ok(bp_model_backward(cs[1], as[1], &b, NULL, dx, 1, &err), &err);
    cu_ok(bp_model_backward(cs[0], as[0], &b, dx, NULL, 1, &err), &err);
    cu_ok(bp_gpu_model_forward(gs[0], &b, NULL, NULL, &err), &err);
    cu_ok(bp_gpu_model_forward(gs[1], &b, bp_gpu_model_output(gs[0]), &lg, &err), &err);
    cu_ok(bp_gpu_model_backward(gs[1], &b, NULL, gdx, 1, &err), &err);
    cu_ok(bp_gpu_model_backward(gs[0], &b, gdx, NULL, 1, &err), &err);
    float fc = (float)lc, fg = (float)lg;
    failures += cu_check("2 stages: loss", BP_CUDA_F32, &fg, &fc, 1);
    float *hdx = cu_down(c, BP_CUDA_F32, gdx, NC);
    failures += cu_check("2 stages: boundary gradient", BP_CUDA_F32, hdx, dx, NC);
    compare_grads("stage 0", gs[0], cs[0], BP_CUDA_F32);
    compare_grads("stage 1", gs[1], cs[1], BP_CUDA_F32);
    for (int s = 0; s < 2; s++) twins_free(&st[s]);
    free(hdx);
    free(dx);
    bp_cuda_free(gdx);
}

static void training(bp_cuda *c) {
    enum { STEPS = 40 };
    bp_err err = {0};
    twins t = twins_make(c, 0, -1);
    bp_model *cpu = t.cpu, *host = t.host;
    bp_gpu_model *g = t.g;
    bp_optim_config oc = {.kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    size_t n = bp_model_num_params(cpu);
    bp_optim o, ho;
    bp_gpu_optim go;
    cu_ok(bp_optim_init(&o, &oc, n, &err), &err);
    cu_ok(bp_optim_init(&ho, &oc, n, &err), &err);
    cu_ok(bp_gpu_optim_init(&go, c, &oc, n, &err), &err);
    float lc[STEPS], lg[STEPS];
    for (int s = 0; s < STEPS; s++) {
        int32_t tok[B * T], tgt[B * T];
        bp_batch b;
        make_batch(s, tok, tgt, &b);
        double l, m;
        bp_model_zero_grad(cpu);
        bp_gpu_model_zero_grad(g);
        both_steps(&t, &b, &m, &l);
        bp_clip_grad_norm(bp_model_grads(cpu), n, 1.0);
        bp_optim_step(&o, bp_model_params(cpu), bp_model_grads(cpu), 1e-3);
        lc[s] = (float)m;
        double sumsq;
        cu_ok(bp_gpu_grad_sumsq(&go, bp_gpu_model_grads(g), n, &sumsq, &err), &err);
        bp_gpu_clip_to(&go, bp_gpu_model_grads(g), n, sqrt(sumsq), 1.0);
        bp_gpu_optim_step(&go, bp_gpu_model_params(g), bp_gpu_model_grads(g), 1e-3);
        bp_gpu_model_params_changed(g);
        lg[s] = (float)l;
    }
    double worst = 0;
    for (int s = 0; s < STEPS; s++) worst = fmax(worst, fabs(lg[s] - lc[s]) / lc[s]);
    printf("fp32 training: loss %.4f -> %.4f (CPU %.4f -> %.4f), worst step rel %.2e%s\n", lg[0],
           lg[STEPS - 1], lc[0], lc[STEPS - 1], worst, worst <= 1e-3 ? "" : "  FAIL");
    failures += !(worst <= 1e-3) + !(lg[STEPS - 1] < lg[0] - 0.5f);
    cu_ok(bp_gpu_model_download(g, false, &err), &err);
    cu_ok(bp_gpu_optim_download(&go, &ho, &err), &err);
    failures += ho.t != o.t;
    /* AdamW divides by sqrt(v): where a gradient is tiny, float rounding moves a weight
     * by up to lr a step; the bound allows a few such steps. */
    const double tol = 5e-3;
    double ep = cu_rel(bp_model_params(host), bp_model_params(cpu), n);
    double em = cu_rel(ho.m, o.m, n), ev = cu_rel(ho.v, o.v, n);
    printf("trained weights rel %.2e, moments rel %.2e %.2e (tol %.0e)\n", ep, em, ev, tol);
    failures += !(ep <= tol) + !(em <= tol) + !(ev <= tol);
    bp_gpu_optim_free(&go);
    bp_optim_free(&ho);
    bp_optim_free(&o);
    twins_free(&t);
}

int main(void) {
    cu_require_gpu();
    bp_cuda *c = cu_context();
    whole_model(c);
    pipeline(c);
    training(c);
    bp_cuda_destroy(c);
    printf("%d comparison(s) failed\n", failures);
    return failures ? 1 : 0;
}
