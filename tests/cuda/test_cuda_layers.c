/* Each CUDA layer (nn/cuda/layers_cuda.h) against its CPU twin (nn/layers.h) on the same
 * random inputs: forward and backward within 1e-4 relative in fp32 (exact fp32 products,
 * TF32 off) and within bf16's tolerance in mixed precision, where the CPU sees the
 * bf16-rounded inputs. Accumulating outputs start from non-zero values, so that an
 * overwrite instead of += fails. Skipped (77) without a GPU. */
#include "cuda_test.h"
#include "nn/cuda/layers_cuda.h"
#include "nn/layers.h"

static int failures;

#define CHECK(what, dt, gpu, cpu, n)                            \
    do {                                                        \
        float *g_ = cu_down(c, dt, gpu, n);                     \
        failures += cu_check(what, dt, g_, cpu, n);             \
        free(g_);                                               \
    } while (0)

static void linear(bp_cuda *c, bp_cuda_dtype dt) {
    enum { N = 64, IC = 48, OC = 80 };
    float *x = cu_normal(N * IC, 1, 1), *w = cu_normal(OC * IC, 0.1, 2), *b = cu_normal(OC, 1, 3);
    float *dy = cu_normal(N * OC, 1, 4), *dw = cu_normal(OC * IC, 1, 5), *db = cu_normal(OC, 1, 6);
    void *dx_d = cu_up(c, dt, x, N * IC), *dw_d = cu_up(c, dt, w, OC * IC),
         *db_d = cu_up(c, dt, b, OC), *ddy = cu_up(c, dt, dy, N * OC);
    float *gdw = cu_up32(c, dw, OC * IC), *gdb = cu_up32(c, db, OC);
    void *y_d = cu_up(c, dt, cu_host(N * OC), N * OC), *gdx = cu_up(c, dt, cu_host(N * IC), N * IC);
    float *y = cu_host(N * OC), *dx = cu_host(N * IC);
    bp_linear_forward(y, x, w, b, N, IC, OC);
    bp_cu_linear_forward(c, dt, y_d, dx_d, dw_d, db_d, N, IC, OC);
    CHECK("linear forward y", dt, y_d, y, N * OC);
    bp_linear_backward(dx, dw, db, dy, x, w, N, IC, OC);
    bp_cu_linear_backward(c, dt, gdx, gdw, gdb, ddy, dx_d, dw_d, N, IC, OC);
    CHECK("linear backward dx", dt, gdx, dx, N * IC);
    CHECK("linear backward dW (+=)", BP_CUDA_F32, gdw, dw, OC * IC);
    CHECK("linear backward db (+=)", BP_CUDA_F32, gdb, db, OC);
}

static void layernorm(bp_cuda *c, bp_cuda_dtype dt) {
    enum { N = 70, C = 80 };
    float *x = cu_normal(N * C, 2, 11), *w = cu_normal(C, 1, 12), *b = cu_normal(C, 1, 13);
    for (int i = 0; i < N * C; i++) x[i] += 3; /* a mean far from 0 */
    float *dy = cu_normal(N * C, 1, 14), *dx = cu_normal(N * C, 1, 15);
    float *dw = cu_normal(C, 1, 16), *db = cu_normal(C, 1, 17);
    void *x_d = cu_up(c, dt, x, N * C), *w_d = cu_up(c, dt, w, C), *b_d = cu_up(c, dt, b, C);
    void *dy_d = cu_up(c, dt, dy, N * C), *dx_d = cu_up(c, dt, dx, N * C);
    void *y_d = cu_up(c, dt, cu_host(N * C), N * C);
    float *gm = cu_up32(c, NULL, N), *gr = cu_up32(c, NULL, N), *gdw = cu_up32(c, dw, C),
          *gdb = cu_up32(c, db, C);
    float *y = cu_host(N * C), *mean = cu_host(N), *rstd = cu_host(N);
    bp_layernorm_forward(y, mean, rstd, x, w, b, N, C);
    bp_cu_layernorm_forward(c, dt, y_d, gm, gr, x_d, w_d, b_d, N, C);
    CHECK("layernorm forward y", dt, y_d, y, N * C);
    CHECK("layernorm forward mean", BP_CUDA_F32, gm, mean, N);
    CHECK("layernorm forward rstd", BP_CUDA_F32, gr, rstd, N);
    bp_layernorm_backward(dx, dw, db, dy, x, w, mean, rstd, N, C);
    bp_cu_layernorm_backward(c, dt, dx_d, gdw, gdb, dy_d, x_d, w_d, gm, gr, N, C);
    CHECK("layernorm backward dx (+=)", dt, dx_d, dx, N * C);
    CHECK("layernorm backward dw (+=)", BP_CUDA_F32, gdw, dw, C);
    CHECK("layernorm backward db (+=)", BP_CUDA_F32, gdb, db, C);
}

static void attention(bp_cuda *c, bp_cuda_dtype dt) {
    enum { B = 2, T = 17, C = 32, NH = 4 };
    size_t nqkv = (size_t)B * T * 3 * C, natt = (size_t)B * NH * T * T, no = (size_t)B * T * C;
    float *qkv = cu_normal(nqkv, 1, 21), *dout = cu_normal(no, 1, 22);
    float *out = cu_host(no), *att = cu_host(natt), *dqkv = cu_host(nqkv), *datt = cu_host(T * T);
    void *qkv_d = cu_up(c, dt, qkv, nqkv), *dout_d = cu_up(c, dt, dout, no);
    void *out_d = cu_up(c, dt, cu_host(no), no), *att_d = cu_up(c, dt, cu_host(natt), natt);
    void *dqkv_d = cu_up(c, dt, cu_host(nqkv), nqkv);
    void *datt_d = cu_up(c, dt, cu_host(NH * T * T), NH * T * T);
    bp_attention_forward(out, att, qkv, B, T, C, NH);
    bp_cu_attention_forward(c, dt, out_d, att_d, qkv_d, B, T, C, NH);
    CHECK("attention forward out", dt, out_d, out, no);
    CHECK("attention forward att (masked)", dt, att_d, att, natt);
    bp_attention_backward(dqkv, datt, dout, qkv, att, B, T, C, NH);
    bp_cu_attention_backward(c, dt, dqkv_d, datt_d, dout_d, qkv_d, att_d, B, T, C, NH);
    CHECK("attention backward dqkv", dt, dqkv_d, dqkv, nqkv);
}

static void elementwise(bp_cuda *c, bp_cuda_dtype dt) {
    enum { N = 1001 };
    float *x = cu_normal(N, 2, 31), *a = cu_normal(N, 1, 32), *dy = cu_normal(N, 1, 33);
    float *y = cu_host(N), *dx = cu_host(N);
    void *x_d = cu_up(c, dt, x, N), *a_d = cu_up(c, dt, a, N), *dy_d = cu_up(c, dt, dy, N);
    void *y_d = cu_up(c, dt, cu_host(N), N), *dx_d = cu_up(c, dt, cu_host(N), N);
    bp_gelu_forward(y, x, N);
    bp_cu_gelu_forward(c, dt, y_d, x_d, N);
    CHECK("gelu forward", dt, y_d, y, N);
    bp_gelu_backward(dx, x, dy, N);
    bp_cu_gelu_backward(c, dt, dx_d, x_d, dy_d, N);
    CHECK("gelu backward", dt, dx_d, dx, N);
    bp_relu_forward(y, x, N);
    bp_cu_relu_forward(c, dt, y_d, x_d, N);
    CHECK("relu forward", dt, y_d, y, N);
    bp_relu_backward(dx, y, dy, N);
    bp_cu_relu_backward(c, dt, dx_d, y_d, dy_d, N);
    CHECK("relu backward", dt, dx_d, dx, N);
    bp_residual_forward(y, x, a, N);
    bp_cu_residual_forward(c, dt, y_d, x_d, a_d, N);
    CHECK("residual forward", dt, y_d, y, N);
}

static void embedding(bp_cuda *c, bp_cuda_dtype dt) {
    enum { B = 3, T = 9, C = 24, V = 50, MAXT = 12 };
    int32_t tok[B * T];
    for (int i = 0; i < B * T; i++) tok[i] = (i * 7 + 3) % V; /* repeats: atomics collide */
    float *wte = cu_normal(V * C, 1, 41), *wpe = cu_normal(MAXT * C, 1, 42);
    float *dout = cu_normal(B * T * C, 1, 43), *dwte = cu_normal(V * C, 1, 44),
          *dwpe = cu_normal(MAXT * C, 1, 45), *out = cu_host(B * T * C);
    void *wte_d = cu_up(c, dt, wte, V * C), *wpe_d = cu_up(c, dt, wpe, MAXT * C);
    void *dout_d = cu_up(c, dt, dout, B * T * C), *out_d = cu_up(c, dt, cu_host(B * T * C), B * T * C);
    float *gdwte = cu_up32(c, dwte, V * C), *gdwpe = cu_up32(c, dwpe, MAXT * C);
    int32_t *tok_d;
    bp_err err = {0};
    cu_ok(bp_cuda_alloc(c, (void **)&tok_d, sizeof tok, "tokens", &err), &err);
    cu_ok(bp_cuda_upload(c, tok_d, tok, sizeof tok, &err), &err);
    bp_embedding_forward(out, tok, wte, wpe, B, T, C);
    bp_cu_embedding_forward(c, dt, out_d, tok_d, wte_d, wpe_d, B, T, C);
    CHECK("embedding forward", dt, out_d, out, B * T * C);
    bp_embedding_backward(dwte, dwpe, dout, tok, B, T, C);
    bp_cu_embedding_backward(c, dt, gdwte, gdwpe, dout_d, tok_d, B, T, C);
    CHECK("embedding backward dwte (+=)", BP_CUDA_F32, gdwte, dwte, V * C);
    CHECK("embedding backward dwpe (+=)", BP_CUDA_F32, gdwpe, dwpe, MAXT * C);
}

static void crossentropy(bp_cuda *c, bp_cuda_dtype dt) {
    enum { N = 33, V = 300 };
    int32_t tgt[N];
    for (int i = 0; i < N; i++) tgt[i] = (i * 37) % V;
    float *logits = cu_normal(N * V, 3, 51), *lse = cu_host(N), *dl = cu_host(N * V);
    void *logits_d = cu_up(c, dt, logits, N * V), *dl_d = cu_up(c, dt, cu_host(N * V), N * V);
    float *glse = cu_up32(c, NULL, N), *gloss = cu_up32(c, NULL, N);
    int32_t *tgt_d;
    bp_err err = {0};
    cu_ok(bp_cuda_alloc(c, (void **)&tgt_d, sizeof tgt, "targets", &err), &err);
    cu_ok(bp_cuda_upload(c, tgt_d, tgt, sizeof tgt, &err), &err);
    float loss = (float)bp_crossentropy_forward(lse, logits, tgt, N, V);
    bp_cu_crossentropy_forward(c, dt, glse, gloss, logits_d, tgt_d, N, V);
    CHECK("crossentropy forward lse", BP_CUDA_F32, glse, lse, N);
    float *l = cu_down(c, BP_CUDA_F32, gloss, N);
    double sum = 0;
    for (int i = 0; i < N; i++) sum += l[i];
    float gl = (float)(sum / N);
    failures += cu_check("crossentropy forward mean loss", dt, &gl, &loss, 1);
    bp_crossentropy_backward(dl, logits, lse, tgt, N, V, 0.7f);
    bp_cu_crossentropy_backward(c, dt, dl_d, logits_d, glse, tgt_d, N, V, 0.7f);
    CHECK("crossentropy backward dlogits", dt, dl_d, dl, N * V);
}

int main(void) {
    cu_require_gpu();
    bp_cuda *c = cu_context();
    bp_cuda_dtype dts[] = {BP_CUDA_F32, BP_CUDA_BF16};
    for (int k = 0; k < 2; k++) {
        linear(c, dts[k]);
        layernorm(c, dts[k]);
        attention(c, dts[k]);
        elementwise(c, dts[k]);
        embedding(c, dts[k]);
        crossentropy(c, dts[k]);
    }
    bp_err err = {0};
    cu_ok(bp_cuda_sync(c, "test", &err), &err);
    bp_cuda_destroy(c);
    printf("%d comparison(s) failed\n", failures);
    return failures ? 1 : 0;
}
