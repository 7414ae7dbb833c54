/* The cpu backend's AdamW update (AVX-512 where the CPU has it) gives the bits of
 * the plain loop, on a range whose ends leave partial vectors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "core/backend.h"
#include "core/rng.h"
#include "core/update_avx512.h"

enum { N = 16 * 40 + 9, OFF = 5 };

/* backend_cpu.c's loop, written out again as the reference. */
static void adamw_plain(const bp_update_args *a, float *p, const float *g, float *m, float *v,
                        size_t off, size_t len) {
    double bc1 = 1.0 - pow(a->beta1, (double)a->t), bc2 = 1.0 - pow(a->beta2, (double)a->t);
    const float b1 = (float)a->beta1, b2 = (float)a->beta2;
    const float decay = (float)(1.0 - a->lr * a->weight_decay);
    const float step = (float)(a->lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    const float eps = (float)a->eps;
    for (size_t i = off; i < off + len; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

static void test_adamw_same_bits(void **state) {
    (void)state;
    static float p[2][N], g[N], m[2][N], v[2][N];
    bp_rng r;
    bp_rng_seed(&r, 3, 0);
    for (int i = 0; i < N; i++) {
        p[0][i] = p[1][i] = (float)bp_rng_normal(&r);
        g[i] = (float)bp_rng_normal(&r) * (i % 5 ? 1e-3f : 10.0f);
        m[0][i] = m[1][i] = (float)bp_rng_normal(&r) * 1e-2f;
        v[0][i] = v[1][i] = (float)bp_rng_uniform(&r) * 1e-4f;
    }
    if (!bp_update_avx512()) printf("this CPU has no AVX-512: the plain loop on both sides\n");
    const bp_backend *be = bp_backend_cpu();
    bp_update_args a = {.kind = BP_UPDATE_ADAMW, .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.95,
                        .eps = 1e-8, .weight_decay = 0.1, .t = 7};
    for (int rep = 0; rep < 3; rep++) {
        be->update(be, &a, p[0], g, m[0], v[0], OFF, N - OFF - 3);
        adamw_plain(&a, p[1], g, m[1], v[1], OFF, N - OFF - 3);
    }
    assert_memory_equal(p[0], p[1], sizeof p[0]);
    assert_memory_equal(m[0], m[1], sizeof m[0]);
    assert_memory_equal(v[0], v[1], sizeof v[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_adamw_same_bits)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
