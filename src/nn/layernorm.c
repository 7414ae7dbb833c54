/* Layer normalization over the last dimension, eps = 1e-5 (PyTorch's default).
 *
 *   x [N, C] -> y [N, C],  y = (x - mean) * rstd * w + b
 *   mean [N], rstd [N] = 1 / sqrt(var + eps)   (saved for backward)
 *   w [C], b [C]
 *
 * Rows are processed in vectors (nn/vec.h); the last partial vector of a row is
 * zero-padded, and lanes past the row are cleared where padding would not vanish. */
#include "nn/layers.h"
#include "nn/vec.h"

#define LN_EPS 1e-5

/* Lanes [n, BP_VLEN) of v set to 0. */
static inline bp_vec clear_tail(bp_vec v, size_t n) {
    for (size_t k = n; k < BP_VLEN; k++) v[k] = 0;
    return v;
}

static inline bp_vec load_n(const bp_real *p, size_t n) {
    return n >= BP_VLEN ? bp_vload(p) : bp_vload_part(p, n);
}

static inline void store_n(bp_real *p, bp_vec v, size_t n) {
    if (n >= BP_VLEN)
        bp_vstore(p, v);
    else
        bp_vstore_part(p, v, n);
}

/* One row, given s, the lane-wise sum of x's vectors (the row's first pass). */
static void norm_row_summed(bp_real *y, bp_real *mean, bp_real *rstd, const bp_real *x,
                            const bp_real *w, const bp_real *b, size_t C, bp_vec s) {
    bp_vec ss = {0};
    bp_real m = bp_vsum(s) / (bp_real)C;
    /* Two passes (mean, then squared deviations) rather than E[x^2] - m^2, which
     * cancels badly when |mean| >> std. */
    for (size_t i = 0; i < C; i += BP_VLEN) {
        bp_vec d = clear_tail(load_n(x + i, C - i) - m, C - i);
        ss += d * d;
    }
    bp_real r = 1 / bp_rsqrt(bp_vsum(ss) / (bp_real)C + (bp_real)LN_EPS);
    for (size_t i = 0; i < C; i += BP_VLEN) {
        size_t n = C - i;
        store_n(y + i, (load_n(x + i, n) - m) * r * load_n(w + i, n) + load_n(b + i, n), n);
    }
    *mean = m;
    *rstd = r;
}

void bp_layernorm_forward(bp_real *y, bp_real *mean, bp_real *rstd, const bp_real *x,
                          const bp_real *w, const bp_real *b, int N, int C) {
    for (int n = 0; n < N; n++) {
        size_t off = (size_t)n * C;
        bp_vec s = {0};
        for (size_t i = 0; i < (size_t)C; i += BP_VLEN) s += load_n(x + off + i, C - i);
        norm_row_summed(y + off, &mean[n], &rstd[n], x + off, w, b, (size_t)C, s);
    }
}

/* The residual add's pass is the norm's first: each row of res is summed as it is
 * written and normalized while it is still in cache. The adds and the sums are those
 * of bp_residual_forward and bp_layernorm_forward (a zero-padded lane adds 0 + 0), so
 * the bits are theirs. */
void bp_residual_layernorm_forward(bp_real *res, bp_real *y, bp_real *mean, bp_real *rstd,
                                   const bp_real *a, const bp_real *b, const bp_real *w,
                                   const bp_real *bias, int N, int C) {
    for (int n = 0; n < N; n++) {
        size_t off = (size_t)n * C;
        bp_vec s = {0};
        for (size_t i = 0; i < (size_t)C; i += BP_VLEN) {
            size_t k = C - i;
            bp_vec r = load_n(a + off + i, k) + load_n(b + off + i, k);
            store_n(res + off + i, r, k);
            s += r;
        }
        norm_row_summed(y + off, &mean[n], &rstd[n], res + off, w, bias, (size_t)C, s);
    }
}

/* One row of backward; see bp_layernorm_backward. */
static void norm_row_backward(bp_real *dx, bp_real *dw, bp_real *db, const bp_real *dy,
                              const bp_real *x, const bp_real *w, bp_real m, bp_real r, size_t C) {
    bp_vec g_sum = {0}, gx_sum = {0};
    for (size_t i = 0; i < C; i += BP_VLEN) { /* padded lanes have dy = 0: they add nothing */
        size_t n = C - i;
        bp_vec d = load_n(dy + i, n), xhat = (load_n(x + i, n) - m) * r, g = d * load_n(w + i, n);
        g_sum += g;
        gx_sum += g * xhat;
        store_n(dw + i, load_n(dw + i, n) + d * xhat, n);
        store_n(db + i, load_n(db + i, n) + d, n);
    }
    bp_real g_mean = bp_vsum(g_sum) / (bp_real)C, gx_mean = bp_vsum(gx_sum) / (bp_real)C;
    for (size_t i = 0; i < C; i += BP_VLEN) {
        size_t n = C - i;
        bp_vec xhat = (load_n(x + i, n) - m) * r;
        bp_vec g = load_n(dy + i, n) * load_n(w + i, n);
        store_n(dx + i, load_n(dx + i, n) + r * (g - g_mean - xhat * gx_mean), n);
    }
}

/*   dy [N, C] -> dx [N, C] += d loss / dx   (accumulated: x is the residual stream)
 *                dw [C] += sum_n dy * xhat,  db [C] += sum_n dy
 * With xhat = (x - mean) * rstd and g = dy * w:
 *   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)). */
void bp_layernorm_backward(bp_real *dx, bp_real *dw, bp_real *db, const bp_real *dy,
                           const bp_real *x, const bp_real *w, const bp_real *mean,
                           const bp_real *rstd, int N, int C) {
    for (int n = 0; n < N; n++) {
        size_t off = (size_t)n * C;
        norm_row_backward(dx + off, dw, db, dy + off, x + off, w, mean[n], rstd[n], (size_t)C);
    }
}
