/* Causal multi-head self-attention on the output of c_attn.
 *
 *   qkv  [B, T, 3C]     q, k, v side by side along the channels (PyTorch's split(C));
 *                       head h uses channels [h*hs, (h+1)*hs) of each, hs = C / NH
 *   att  [B, NH, T, T]  softmax probabilities, saved for backward; zero above the
 *                       diagonal (position t attends to positions <= t only)
 *   out  [B, T, C]      heads side by side, ready for c_proj
 *
 * T is the T of the batch, which may be smaller than the model's seq_len. Every
 * product runs per (batch, head) through bp_gemm on strided views of qkv, so no
 * transposed copies of q, k, v are made. */
#include <string.h>

#include "nn/layers.h"
#include "nn/vec.h"

/* Row-wise softmax of the causal scores in place: row t keeps columns 0..t. */
static void causal_softmax(bp_real *a, int T) {
    for (int t = 0; t < T; t++) {
        bp_real *row = a + (size_t)t * T;
        size_t n = (size_t)t + 1;
        bp_real sum = bp_vexp_shift(row, row, n, bp_vmax(row, n), 1);
        bp_vscale(row, n, 1 / sum);
        memset(row + n, 0, (size_t)(T - t - 1) * sizeof *row);
    }
}

void bp_attention_forward(bp_real *out, bp_real *att, const bp_real *qkv, int B, int T, int C,
                          int NH) {
    int hs = C / NH, C3 = 3 * C;
    bp_real scale = 1 / bp_rsqrt((bp_real)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            const bp_real *q = qkv + (size_t)b * T * C3 + (size_t)h * hs;
            const bp_real *k = q + C, *v = q + 2 * C;
            bp_real *a = att + ((size_t)b * NH + h) * T * T;
            /* scores = q k^T / sqrt(hs) [T, T], then probabilities */
            bp_gemm(false, true, T, T, hs, scale, q, C3, k, C3, 0, a, T);
            causal_softmax(a, T);
            /* out_h = att v [T, hs] */
            bp_gemm(false, false, T, hs, T, 1, a, T, v, C3, 0, out + (size_t)b * T * C + h * hs, C);
        }
    }
}

/* Softmax backward in place: g = a * (g - sum_j a_j g_j) * scale per row. Above the
 * diagonal a is 0, so those entries become 0 and drop out of the products. */
static void causal_softmax_backward(bp_real *g, const bp_real *a, int T, bp_real scale) {
    for (int t = 0; t < T; t++) {
        bp_real *gr = g + (size_t)t * T;
        const bp_real *ar = a + (size_t)t * T;
        bp_real dot = 0;
        for (int j = 0; j <= t; j++) dot += ar[j] * gr[j];
        for (int j = 0; j <= t; j++) gr[j] = ar[j] * (gr[j] - dot) * scale;
        for (int j = t + 1; j < T; j++) gr[j] = 0;
    }
}

/*   dout [B, T, C] -> dqkv [B, T, 3C] (overwritten)
 *   datt [T, T]    scratch for one (batch, head) */
void bp_attention_backward(bp_real *dqkv, bp_real *datt, const bp_real *dout, const bp_real *qkv,
                           const bp_real *att, int B, int T, int C, int NH) {
    int hs = C / NH, C3 = 3 * C;
    bp_real scale = 1 / bp_rsqrt((bp_real)hs);
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < NH; h++) {
            size_t base = (size_t)b * T * C3 + (size_t)h * hs;
            const bp_real *q = qkv + base, *k = q + C, *v = q + 2 * C;
            bp_real *dq = dqkv + base, *dk = dq + C, *dv = dq + 2 * C;
            const bp_real *a = att + ((size_t)b * NH + h) * T * T;
            const bp_real *dy = dout + (size_t)b * T * C + h * hs;
            bp_gemm(false, true, T, T, hs, 1, dy, C, v, C3, 0, datt, T);   /* d att = dy v^T */
            bp_gemm(true, false, T, hs, T, 1, a, T, dy, C, 0, dv, C3);     /* dv = att^T dy */
            causal_softmax_backward(datt, a, T, scale);                    /* d scores */
            bp_gemm(false, false, T, hs, T, 1, datt, T, k, C3, 0, dq, C3); /* dq = ds k */
            bp_gemm(true, false, T, hs, T, 1, datt, T, q, C3, 0, dk, C3);  /* dk = ds^T q */
        }
    }
}
