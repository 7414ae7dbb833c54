/* The float build of nn/ (the one training uses) against the double build that the
 * gradient checks validated: same configurations, initialization and batch give the
 * same loss to ~1e-5 and the same gradient norm to ~1e-4 (the double results come
 * from the helper program nn_ref_f64). Also the float-only code: the polynomial exp
 * and the vector kernels on sizes that leave a partial vector, and GELU's AVX-512
 * loops bit for bit against its 16-byte ones, and the fused passes (residual +
 * LayerNorm, GELU's backward + the bias gradient) against the separate ones. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include <string.h>

#include "nn/avx512.h"
#include "nn/bf16.h"
#include "nn/gelu_kernels.h"
#include "nn/layers.h"
#include "nn/vec.h"
#include "nn_fixture.h"
#include "nn_test.h"

_Static_assert(sizeof(bp_real) == sizeof(float), "this test checks the float build");

static void test_float_matches_double(void **state) {
    (void)state;
    FILE *ref = popen(NN_REF_F64, "r");
    assert_non_null(ref);
    int cases = 0;
    double ld, gd;
    while (fscanf(ref, "%lf %lf", &ld, &gd) == 2) {
        double lf = NAN, gf = NAN;
        assert_int_equal(fx_run_case(cases, &lf, &gf), BP_OK);
        printf("case %d: loss float %.9f double %.9f, |grad| float %.9g double %.9g\n", cases, lf,
               ld, gf, gd);
        assert_true(fabs(lf - ld) <= 1e-5 * fabs(ld));
        assert_true(fabs(gf - gd) <= 1e-4 * gd);
        cases++;
    }
    assert_int_equal(pclose(ref), 0);
    assert_true(cases >= 4);
}

static void test_vexp(void **state) {
    (void)state;
    double worst = 0;
    for (double x0 = -87.0; x0 < 87.9; x0 += 0.0137 * BP_VLEN) {
        bp_vec x;
        for (size_t k = 0; k < BP_VLEN; k++) x[k] = (float)(x0 + 0.0137 * k);
        bp_vec e = bp_vexp(x);
        for (size_t k = 0; k < BP_VLEN; k++) worst = fmax(worst, fabs(e[k] / exp(x[k]) - 1));
    }
    printf("exp: worst relative error %.3g\n", worst);
    assert_true(worst < 2e-7);
    bp_vec s = bp_vexp((bp_vec){NAN, -100.0f, 100.0f, 0.0f});
    assert_true(isnan(s[0]));
    assert_true(s[1] == 0);
    assert_true(isfinite(s[2]) && s[2] > 1e38f);
    assert_true(fabs(s[3] - 1) < 1e-7);
}

/* Sizes that are not multiples of the vector width, against double formulas. */
static void test_kernels_partial_vectors(void **state) {
    (void)state;
    enum { N = 3, C = 7, T = 5, AC = 12, NH = 3 };
    float x[N * C], w[C], b[C], y[N * C], mean[N], rstd[N];
    nn_fill_normal(x, N * C, 2, 1);
    nn_fill_normal(w, C, 1, 2);
    nn_fill_normal(b, C, 1, 3);
    bp_layernorm_forward(y, mean, rstd, x, w, b, N, C);
    for (int n = 0; n < N; n++) {
        double m = 0, v = 0;
        for (int i = 0; i < C; i++) m += x[n * C + i] / (double)C;
        for (int i = 0; i < C; i++) v += (x[n * C + i] - m) * (x[n * C + i] - m) / C;
        for (int i = 0; i < C; i++)
            assert_true(fabs(y[n * C + i] - ((x[n * C + i] - m) / sqrt(v + 1e-5) * w[i] + b[i])) <
                        1e-5);
    }
    float g[N * C];
    bp_gelu_forward(g, x, N * C);
    for (int i = 0; i < N * C; i++) {
        double u = sqrt(2 / M_PI) * (x[i] + 0.044715 * x[i] * x[i] * x[i]);
        assert_true(fabs(g[i] - 0.5 * x[i] * (1 + tanh(u))) < 1e-6 * (1 + fabs(x[i])));
    }
    int32_t tgt[N] = {0, 6, 3};
    float lse[N];
    double loss = bp_crossentropy_forward(lse, x, tgt, N, C), ref = 0;
    for (int n = 0; n < N; n++) {
        double z = 0;
        for (int j = 0; j < C; j++) z += exp(x[n * C + j]);
        ref += (log(z) - x[n * C + tgt[n]]) / N;
    }
    assert_true(fabs(loss - ref) < 1e-6 * fabs(ref));
    float qkv[2 * T * 3 * AC], out[2 * T * AC], att[2 * NH * T * T];
    nn_fill_normal(qkv, 2 * T * 3 * AC, 1, 4);
    bp_attention_forward(out, att, qkv, 2, T, AC, NH);
    for (int i = 0; i < 2 * T * AC; i++)
        assert_true(fabs(out[i] - nn_attention_reference(qkv, T, AC, NH, i / (T * AC), i / AC % T,
                                                         i % AC)) < 1e-5);
}

/* Wide values (saturating exp, tails of both signs), NaN, and a length that leaves a
 * partial vector of either width: the layer's GELU (on AVX-512 where the CPU has it)
 * gives the bits of the 16-byte loop. */
static void test_gelu_wide_vectors_same_bits(void **state) {
    (void)state;
    enum { n = 16 * 61 + 13 };
    float x[n], dy[n], y[n], want[n];
    for (int i = 0; i < n; i++) {
        x[i] = (float)((i * 7919) % 2001 - 1000) / (i % 3 ? 50.0f : 5.0f);
        dy[i] = (float)((i * 104729) % 997) / 997.0f - 0.5f;
    }
    x[17] = NAN;
    if (!bp_nn_avx512()) printf("this CPU has no AVX-512: both sides run the 16-byte loop\n");
    bp_gelu_forward(y, x, n);
    gelu_forward_loop(want, x, n);
    assert_memory_equal(y, want, sizeof y);
    bp_gelu_backward(y, x, dy, n);
    gelu_backward_loop(want, x, dy, n);
    assert_memory_equal(y, want, sizeof y);
}

/* The residual add fused with the LayerNorm after it gives the bits of the two
 * layers one after the other, in place as gpt uses it (res aliases a), on widths
 * with and without a partial vector. */
static void test_residual_layernorm_same_bits(void **state) {
    (void)state;
    enum { N = 5, CMAX = 67 };
    const int widths[] = {7, 16, 32, 37, 67};
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        int C = widths[k];
        float a[N * CMAX], b[N * CMAX], w[CMAX], bias[CMAX], res[N * CMAX], y[N * CMAX];
        float want_y[N * CMAX], mean[N], rstd[N], want_mean[N], want_rstd[N];
        nn_fill_normal(a, N * C, 3, 10 + (uint64_t)k);
        nn_fill_normal(b, N * C, 1, 20 + (uint64_t)k);
        nn_fill_normal(w, C, 1, 30 + (uint64_t)k);
        nn_fill_normal(bias, C, 1, 40 + (uint64_t)k);
        a[3] += 100; /* a row whose mean is far from 0 */
        memcpy(res, a, sizeof(float) * N * C);
        bp_residual_layernorm_forward(res, y, mean, rstd, res, b, w, bias, N, C);
        bp_residual_forward(a, a, b, (size_t)N * C);
        bp_layernorm_forward(want_y, want_mean, want_rstd, a, w, bias, N, C);
        assert_memory_equal(res, a, sizeof(float) * N * C);
        assert_memory_equal(y, want_y, sizeof(float) * N * C);
        assert_memory_equal(mean, want_mean, sizeof mean);
        assert_memory_equal(rstd, want_rstd, sizeof rstd);
    }
}

/* GELU's backward with the bias gradient added in its pass gives the bits of
 * bp_gelu_backward then the rows added into db (bp_linear_backward's db), in place
 * as gpt uses it, on widths with and without a partial vector of either size. */
static void test_gelu_backward_bias_same_bits(void **state) {
    (void)state;
    enum { ROWS = 4, FMAX = 16 * 3 + 5 };
    const size_t widths[] = {5, 16, 48, FMAX};
    for (size_t k = 0; k < sizeof widths / sizeof *widths; k++) {
        size_t F = widths[k], n = ROWS * F;
        float x[ROWS * FMAX], dy[ROWS * FMAX], want[ROWS * FMAX], db[FMAX], want_db[FMAX];
        nn_fill_normal(x, n, 3, 50 + (uint64_t)k);
        nn_fill_normal(dy, n, 1, 60 + (uint64_t)k);
        nn_fill_normal(db, F, 1, 70 + (uint64_t)k);
        memcpy(want_db, db, F * sizeof *db);
        bp_gelu_backward(want, x, dy, n);
        for (size_t r = 0; r < ROWS; r++) bp_vacc(want_db, want + r * F, F);
        bp_gelu_backward_bias(dy, db, x, dy, ROWS, F);
        assert_memory_equal(dy, want, n * sizeof *dy);
        assert_memory_equal(db, want_db, F * sizeof *db);
    }
}

/* nn/bf16.h's rounding: to nearest, ties to even, overflow to infinity, NaN kept;
 * the array versions (in place, and into a copy) give the scalar's bits on every
 * lane and the tail. */
static void test_bf16_round(void **state) {
    (void)state;
    const float tie_down = 1.0f + 0x1p-8f, tie_up = 1.0f + 3 * 0x1p-8f, above = 1.0f + 0x1.2p-8f;
    assert_true(bp_bf16_round1(tie_down) == 1.0f);
    assert_true(bp_bf16_round1(tie_up) == 1.0f + 0x1p-6f);
    assert_true(bp_bf16_round1(above) == 1.0f + 0x1p-7f);
    assert_true(bp_bf16_round1(-above) == -(1.0f + 0x1p-7f));
    assert_true(isinf(bp_bf16_round1(3.4e38f)));
    assert_true(isnan(bp_bf16_round1(NAN)));
    enum { n = 4 * 9 + 3 };
    float x[n], want[n];
    for (int i = 0; i < n; i++) x[i] = (i % 7 == 3) ? NAN : (float)(i - 17) * 1.0371f * (1 + 0x1p-9f);
    for (int i = 0; i < n; i++) want[i] = bp_bf16_round1(x[i]);
    float copy[n];
    bp_bf16_round_copy(copy, x, n);
    bp_bf16_round(x, n);
    assert_memory_equal(x, want, sizeof x);
    assert_memory_equal(copy, want, sizeof copy);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_matches_double),
        cmocka_unit_test(test_vexp),
        cmocka_unit_test(test_kernels_partial_vectors),
        cmocka_unit_test(test_gelu_wide_vectors_same_bits),
        cmocka_unit_test(test_residual_layernorm_same_bits),
        cmocka_unit_test(test_gelu_backward_bias_same_bits),
        cmocka_unit_test(test_bf16_round),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
