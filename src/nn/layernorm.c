/* Layer normalization over the last dimension, eps = 1e-5 (PyTorch's default).
 *
 *   x [N, C] -> y [N, C],  y = (x - mean) * rstd * w + b
 *   mean [N], rstd [N] = 1 / sqrt(var + eps)   (saved for backward)
 *   w [C], b [C] */
#include "nn/layers.h"

#define LN_EPS 1e-5

void bp_layernorm_forward(bp_real *y, bp_real *mean, bp_real *rstd, const bp_real *x,
                          const bp_real *w, const bp_real *b, int N, int C) {
    for (int n = 0; n < N; n++) {
        const bp_real *xr = x + (size_t)n * C;
        bp_real *yr = y + (size_t)n * C;
        bp_real sum = 0;
        for (int i = 0; i < C; i++) sum += xr[i];
        bp_real m = sum / C;
        /* Two passes (mean, then squared deviations) rather than E[x^2] - m^2, which
         * cancels badly when |mean| >> std. */
        bp_real ss = 0;
        for (int i = 0; i < C; i++) ss += (xr[i] - m) * (xr[i] - m);
        bp_real s = 1 / bp_rsqrt(ss / C + (bp_real)LN_EPS);
        for (int i = 0; i < C; i++) yr[i] = (xr[i] - m) * s * w[i] + b[i];
        mean[n] = m;
        rstd[n] = s;
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
        const bp_real *xr = x + (size_t)n * C, *dyr = dy + (size_t)n * C;
        bp_real *dxr = dx + (size_t)n * C;
        bp_real m = mean[n], s = rstd[n];
        bp_real g_sum = 0, gx_sum = 0;
        for (int i = 0; i < C; i++) {
            bp_real xhat = (xr[i] - m) * s, g = dyr[i] * w[i];
            g_sum += g;
            gx_sum += g * xhat;
            dw[i] += dyr[i] * xhat;
            db[i] += dyr[i];
        }
        bp_real g_mean = g_sum / C, gx_mean = gx_sum / C;
        for (int i = 0; i < C; i++) {
            bp_real xhat = (xr[i] - m) * s;
            dxr[i] += s * (dyr[i] * w[i] - g_mean - xhat * gx_mean);
        }
    }
}
