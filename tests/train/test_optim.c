/* nn/optim.c and nn/lr.c against straightforward double-precision references of
 * PyTorch's update rules, gradient-norm clipping and the schedules' shape. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "nn/lr.h"
#include "nn/optim.h"

enum { N = 257, STEPS = 6 };

static void random_vec(bp_rng *r, float *x, double scale) {
    for (int i = 0; i < N; i++) x[i] = (float)(bp_rng_normal(r) * scale);
}

static void test_sgd_matches_reference(void **state) {
    (void)state;
    bp_optim_config c = {.kind = BP_OPTIM_SGD, .momentum = 0.9, .weight_decay = 0.01};
    bp_optim o;
    assert_int_equal(bp_optim_init(&o, &c, N, NULL), BP_OK);
    float p[N], g[N];
    double rp[N], buf[N] = {0};
    bp_rng r;
    bp_rng_seed(&r, 1, 0);
    random_vec(&r, p, 1);
    for (int i = 0; i < N; i++) rp[i] = p[i];
    for (int s = 0; s < STEPS; s++) {
        random_vec(&r, g, 0.1);
        bp_optim_step(&o, p, g, 0.05);
        for (int i = 0; i < N; i++) {
            double d = g[i] + 0.01 * rp[i];
            buf[i] = 0.9 * buf[i] + d;
            rp[i] -= 0.05 * buf[i];
        }
    }
    for (int i = 0; i < N; i++) assert_true(fabs(p[i] - rp[i]) < 1e-5);
    bp_optim_free(&o);
}

static void test_adamw_matches_reference(void **state) {
    (void)state;
    bp_optim_config c = {
        .kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    bp_optim o;
    assert_int_equal(bp_optim_init(&o, &c, N, NULL), BP_OK);
    float p[N], g[N];
    double rp[N], m[N] = {0}, v[N] = {0};
    bp_rng r;
    bp_rng_seed(&r, 2, 0);
    random_vec(&r, p, 1);
    for (int i = 0; i < N; i++) rp[i] = p[i];
    for (int s = 1; s <= STEPS; s++) {
        random_vec(&r, g, 0.1);
        double lr = 1e-3 * s;
        bp_optim_step(&o, p, g, lr);
        for (int i = 0; i < N; i++) {
            rp[i] *= 1 - lr * 0.1;
            m[i] = 0.9 * m[i] + 0.1 * g[i];
            v[i] = 0.95 * v[i] + 0.05 * (double)g[i] * g[i];
            double mh = m[i] / (1 - pow(0.9, s)), vh = v[i] / (1 - pow(0.95, s));
            rp[i] -= lr * mh / (sqrt(vh) + 1e-8);
        }
    }
    for (int i = 0; i < N; i++) assert_true(fabs(p[i] - rp[i]) < 1e-5);
    assert_int_equal(o.t, STEPS);
    bp_optim_free(&o);
}

/* An update applied in pieces (one tick, then ranges in any order, as buckets
 * arrive) gives the same bits as one bp_optim_step, for both optimizers. */
static void test_update_in_pieces(void **state) {
    (void)state;
    bp_optim_config cs[2] = {{.kind = BP_OPTIM_SGD, .momentum = 0.9, .weight_decay = 0.01},
                             {.kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8,
                              .weight_decay = 0.1}};
    const size_t cut[] = {200, 57, 0}; /* ranges [200, 257), [57, 200), [0, 57) */
    for (int k = 0; k < 2; k++) {
        bp_optim whole, pieces;
        assert_int_equal(bp_optim_init(&whole, &cs[k], N, NULL), BP_OK);
        assert_int_equal(bp_optim_init(&pieces, &cs[k], N, NULL), BP_OK);
        float p[N], q[N], g[N];
        bp_rng r;
        bp_rng_seed(&r, 3, 0);
        random_vec(&r, p, 1);
        memcpy(q, p, sizeof p);
        for (int s = 0; s < STEPS; s++) {
            random_vec(&r, g, 0.1);
            bp_optim_step(&whole, p, g, 1e-2);
            pieces.t++;
            for (size_t c = 0, end = N; c < 3; end = cut[c++])
                bp_optim_update(&pieces, q, g, 1e-2, cut[c], end - cut[c]);
        }
        assert_memory_equal(p, q, sizeof p);
        assert_int_equal(pieces.t, whole.t);
        bp_optim_free(&whole);
        bp_optim_free(&pieces);
    }
}

/* AdamW's two moments must not start at the same address modulo the page: there
 * the CPU stalls each load of v[i] behind the store to m[i] (nn/optim.c). Sizes
 * around a page and large ones, whose allocations all start alike. */
static void test_moments_apart_in_the_page(void **state) {
    (void)state;
    bp_optim_config c = {.kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    size_t sizes[] = {1, 1023, 1024, 1025, 1 << 20, (1 << 20) + 512, 834000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        bp_optim o;
        assert_int_equal(bp_optim_init(&o, &c, sizes[i], NULL), BP_OK);
        size_t d = (size_t)((uintptr_t)o.v - (uintptr_t)o.m);
        assert_true(d >= sizes[i] * sizeof(float));
        assert_int_equal(d % 4096, 2048);
        for (size_t k = 0; k < sizes[i]; k++) assert_true(o.m[k] == 0 && o.v[k] == 0);
        bp_optim_free(&o);
    }
}

static void test_clip(void **state) {
    (void)state;
    float g[4] = {3, 4, 0, 0};
    assert_true(fabs(bp_clip_grad_norm(g, 4, 0) - 5) < 1e-9); /* 0: measure only */
    assert_true(g[0] == 3);
    assert_true(fabs(bp_clip_grad_norm(g, 4, 1) - 5) < 1e-9);
    assert_true(fabs(sqrt(g[0] * g[0] + g[1] * g[1]) - 1) < 1e-5);
    assert_true(fabs(bp_clip_grad_norm(g, 4, 10) - 1) < 1e-5); /* below max: untouched */
}

static void test_schedules(void **state) {
    (void)state;
    bp_lr_schedule c = {.kind = BP_LR_CONSTANT, .lr = 0.1, .total = 10};
    assert_true(bp_lr_at(&c, 0) == 0.1 && bp_lr_at(&c, 9) == 0.1);
    bp_lr_schedule s = {.kind = BP_LR_COSINE, .lr = 1.0, .min_lr = 0.1, .warmup = 4, .total = 20};
    for (int k = 0; k < 4; k++) assert_true(fabs(bp_lr_at(&s, k) - (k + 1) / 4.0) < 1e-12);
    assert_true(fabs(bp_lr_at(&s, 4) - 1.0) < 1e-12);  /* decay starts at the peak */
    assert_true(fabs(bp_lr_at(&s, 19) - 0.1) < 1e-12); /* and ends at min_lr */
    for (int k = 5; k < 20; k++) assert_true(bp_lr_at(&s, k) < bp_lr_at(&s, k - 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sgd_matches_reference),
        cmocka_unit_test(test_adamw_matches_reference),
        cmocka_unit_test(test_update_in_pieces),
        cmocka_unit_test(test_moments_apart_in_the_page),
        cmocka_unit_test(test_clip),
        cmocka_unit_test(test_schedules),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
