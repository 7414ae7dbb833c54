/* The float build of nn/ (the one training uses) against the double build that the
 * gradient checks validated: same configurations, initialization and batch give the
 * same loss to ~1e-5 and the same gradient norm to ~1e-4 (the double results come
 * from the helper program nn_ref_f64). Also the float-only code: the polynomial exp
 * and the vector kernels on sizes that leave a partial vector. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float_matches_double),
        cmocka_unit_test(test_vexp),
        cmocka_unit_test(test_kernels_partial_vectors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
