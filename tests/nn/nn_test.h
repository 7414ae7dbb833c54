/* Helpers shared by the nn/ tests: seeded random fills and the central-difference
 * gradient check. */
#ifndef BP_TESTS_NN_TEST_H
#define BP_TESTS_NN_TEST_H

#include <math.h>
#include <stddef.h>
#include <stdio.h>

#include "core/rng.h"
#include "nn/real.h"

static inline void nn_fill_normal(bp_real *x, size_t n, double std, uint64_t seed) {
    bp_rng r;
    bp_rng_seed(&r, seed, 99);
    for (size_t i = 0; i < n; i++) x[i] = (bp_real)(std * bp_rng_normal(&r));
}

/* A scalar function of some parameters, evaluated by the gradient check. */
typedef double (*nn_loss_fn)(void *ctx);

/* Step and tolerances of the check, for double precision: the truncation error of a
 * central difference with h = 1e-5 is ~1e-10 and the rounding error ~1e-16/h, so a
 * correct gradient agrees to ~1e-9 while any wrong term shows at ~1e-3 or more. */
#define NN_FD_H 1e-5
#define NN_FD_RTOL 1e-6
#define NN_FD_ATOL 1e-8

/* Worst ratio |analytic - numeric| / (RTOL * max(|analytic|, |numeric|) + ATOL) over
 * x[0..n), perturbing x in place (and restoring it); <= 1 means the gradient is right.
 * `what` names the tensor in the message printed for a failure. */
static inline double nn_fd_check(nn_loss_fn f, void *ctx, bp_real *x, const bp_real *grad, size_t n,
                                 const char *what) {
    double worst = 0;
    size_t at = 0;
    double num_at = 0;
    for (size_t i = 0; i < n; i++) {
        bp_real save = x[i];
        x[i] = save + (bp_real)NN_FD_H;
        double fp = f(ctx);
        x[i] = save - (bp_real)NN_FD_H;
        double fm = f(ctx);
        x[i] = save;
        double num = (fp - fm) / (2 * NN_FD_H), ana = grad[i];
        double ratio = fabs(num - ana) / (NN_FD_RTOL * fmax(fabs(num), fabs(ana)) + NN_FD_ATOL);
        if (ratio > worst) {
            worst = ratio;
            at = i;
            num_at = num;
        }
    }
    if (worst > 1)
        printf("gradient check %s: element %zu analytic %.12g numeric %.12g\n", what, at,
               (double)grad[at], num_at);
    return worst;
}

/* Causal attention computed directly from its formula, in double, for the output
 * channel c of position t of sequence b: sum_{s<=t} softmax_s(q_t . k_s / sqrt(hs)) v_s
 * with qkv laid out [B, T, 3C] as bp_attention_forward takes it; T <= 64. */
static inline double nn_attention_reference(const bp_real *qkv, int T, int C, int NH, int b, int t,
                                            int c) {
    int hs = C / NH, h = c / hs;
    const bp_real *seq = qkv + (size_t)b * T * 3 * C;
    double sc[64], mx = -INFINITY, sum = 0, out = 0;
    for (int s = 0; s <= t; s++) {
        sc[s] = 0;
        for (int i = 0; i < hs; i++)
            sc[s] += (double)seq[t * 3 * C + h * hs + i] * seq[s * 3 * C + C + h * hs + i];
        sc[s] /= sqrt((double)hs);
        mx = fmax(mx, sc[s]);
    }
    for (int s = 0; s <= t; s++) sum += exp(sc[s] - mx);
    for (int s = 0; s <= t; s++) out += exp(sc[s] - mx) / sum * seq[s * 3 * C + 2 * C + c];
    return out;
}

#endif
