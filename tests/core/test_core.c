/* core/: status messages, aligned buffers and arena, RNG reproducibility and
 * distribution, the BLAS wrapper against a naive product, and flushing denormals
 * (in this thread and in a thread it starts). */
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/blas.h"
#include "core/buf.h"
#include "core/denormals.h"
#include "core/finite.h"
#include "core/rng.h"
#include "core/timer.h"

static void test_status_context(void **state) {
    (void)state;
    bp_err err;
    bp_err_clear(&err);
    int rc = bp_fail(&err, BP_EIO, "cannot open %s", "x.bin");
    assert_int_equal(rc, BP_EIO);
    bp_err_context(&err, "rank %d", 3);
    assert_string_equal(err.msg, "rank 3: cannot open x.bin");
    assert_int_equal(bp_exit_code(BP_OK), 0);
    assert_int_equal(bp_exit_code(BP_EUSAGE), 2);
    assert_int_equal(bp_exit_code(BP_EFORMAT), 1);
}

static void test_alloc_aligned_zeroed(void **state) {
    (void)state;
    for (size_t n = 1; n < 5000; n = n * 3 + 1) {
        unsigned char *p = bp_alloc(n);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % BP_ALIGN, 0);
        for (size_t i = 0; i < n; i++) assert_int_equal(p[i], 0);
        bp_free(p);
    }
    assert_null(bp_alloc(0));
}

static void test_arena(void **state) {
    (void)state;
    bp_arena a;
    assert_int_equal(bp_arena_init(&a, 1000, NULL), BP_OK);
    void *x = bp_arena_take(&a, 10), *y = bp_arena_take(&a, 100);
    assert_non_null(x);
    assert_non_null(y);
    assert_int_equal((uintptr_t)y % BP_ALIGN, 0);
    assert_true((char *)y >= (char *)x + 10);
    assert_null(bp_arena_take(&a, 1000));
    bp_arena_reset(&a);
    assert_ptr_equal(bp_arena_take(&a, 1), x);
    assert_true(a.peak >= 192);
    bp_arena_free(&a);
}

static void test_rng_reproducible_and_streams(void **state) {
    (void)state;
    bp_rng a, b, c;
    bp_rng_seed(&a, 1234, 0);
    bp_rng_seed(&b, 1234, 0);
    bp_rng_seed(&c, 1234, 1);
    int same_stream_diff = 0;
    for (int i = 0; i < 1000; i++) {
        uint64_t x = bp_rng_u64(&a), y = bp_rng_u64(&b), z = bp_rng_u64(&c);
        assert_true(x == y);
        same_stream_diff += (x == z);
    }
    assert_int_equal(same_stream_diff, 0);
    /* A copied state continues the same sequence (what checkpoints rely on). */
    bp_rng saved = a;
    uint64_t next = bp_rng_u64(&a);
    assert_true(bp_rng_u64(&saved) == next);
}

static void test_rng_distribution(void **state) {
    (void)state;
    bp_rng r;
    bp_rng_seed(&r, 7, 0);
    const int n = 200000;
    double s = 0, s2 = 0, u = 0;
    int counts[7] = {0};
    for (int i = 0; i < n; i++) {
        double z = bp_rng_normal(&r);
        s += z;
        s2 += z * z;
        double v = bp_rng_uniform(&r);
        assert_true(v >= 0.0 && v < 1.0);
        u += v;
        counts[bp_rng_below(&r, 7)]++;
    }
    assert_true(fabs(s / n) < 0.01);
    assert_true(fabs(s2 / n - 1.0) < 0.02);
    assert_true(fabs(u / n - 0.5) < 0.005);
    for (int k = 0; k < 7; k++) assert_true(fabs(counts[k] - n / 7.0) < 0.03 * n / 7.0);
}

static void naive(bool ta, bool tb, int M, int N, int K, const float *A, const float *B, double *C) {
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double acc = 0;
            for (int k = 0; k < K; k++) {
                double a = ta ? A[k * M + i] : A[i * K + k];
                double b = tb ? B[j * K + k] : B[k * N + j];
                acc += a * b;
            }
            C[i * N + j] = acc;
        }
}

static void test_sgemm_all_transposes(void **state) {
    (void)state;
    enum { M = 5, N = 7, K = 3 };
    float A[M * K], B[K * N], C[M * N];
    double R[M * N];
    bp_rng r;
    bp_rng_seed(&r, 1, 0);
    for (int i = 0; i < M * K; i++) A[i] = (float)bp_rng_normal(&r);
    for (int i = 0; i < K * N; i++) B[i] = (float)bp_rng_normal(&r);
    for (int t = 0; t < 4; t++) {
        bool ta = t & 1, tb = t & 2;
        for (int i = 0; i < M * N; i++) C[i] = 1.0f;
        /* C = A B + 0.5 C with A, B stored transposed when ta / tb. */
        bp_sgemm(ta, tb, M, N, K, 1.0f, A, ta ? M : K, B, tb ? K : N, 0.5f, C, N);
        naive(ta, tb, M, N, K, A, B, R);
        for (int i = 0; i < M * N; i++) assert_true(fabs(C[i] - (R[i] + 0.5)) < 1e-5);
    }
}

static void test_timer_monotonic(void **state) {
    (void)state;
    double t0 = bp_now();
    bp_sleep_until(t0 + 0.01);
    double t1 = bp_now();
    assert_true(t1 - t0 >= 0.0099);
    assert_true(t1 - t0 < 0.5);
}

/* A denormal product, and a denormal taken as an input: both zero when flushed. The
 * volatiles keep the compiler from folding them at build time. */
static void *denormal_results(void *out) {
    volatile float tiny = FLT_MIN, half = 0.5f, denormal = FLT_MIN / 4;
    float *r = out;
    r[0] = tiny * half;
    r[1] = denormal * 1.0f;
    return NULL;
}

static void test_denormals_flush(void **state) {
    (void)state;
    float r[2];
    if (!bp_denormals_flush(false)) skip(); /* a CPU without the mode */
    denormal_results(r);
    assert_true(r[0] > 0 && r[0] < FLT_MIN);
    assert_true(r[1] > 0);
    assert_true(bp_denormals_flush(true));
    denormal_results(r);
    assert_true(r[0] == 0 && r[1] == 0);
    pthread_t th; /* a thread started now inherits the mode */
    r[0] = r[1] = 1;
    assert_int_equal(pthread_create(&th, NULL, denormal_results, r), 0);
    pthread_join(th, NULL);
    assert_true(r[0] == 0 && r[1] == 0);
    bp_denormals_flush(false);
    denormal_results(r);
    assert_true(r[0] > 0 && r[1] > 0);
}

/* Every length around the vector loops' strides, a non-finite value at every place
 * (the vector body and the tail): found; the sum of squares as the sequential sum's. */
static void test_finite_and_sumsq_every_length(void **state) {
    (void)state;
    float x[71];
    bp_rng rng;
    bp_rng_seed(&rng, 5, 0);
    for (size_t n = 0; n <= 70; n++) {
        double want = 0;
        for (size_t i = 0; i < n; i++) {
            x[i] = (float)bp_rng_normal(&rng) * 3.0f;
            want += (double)x[i] * (double)x[i];
        }
        assert_true(bp_all_finite(x, n));
        double got = bp_sumsq(x, n);
        assert_true(fabs(got - want) <= 1e-15 * want && (float)got == (float)want);
        const float bad[3] = {NAN, INFINITY, -INFINITY};
        for (size_t i = 0; i < n; i++) {
            float keep = x[i];
            x[i] = bad[i % 3];
            assert_false(bp_all_finite(x, n));
            assert_false(isfinite(bp_sumsq(x, n)));
            x[i] = keep;
        }
        x[n] = NAN; /* just past the end: not looked at */
        assert_true(bp_all_finite(x, n));
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_context),     cmocka_unit_test(test_alloc_aligned_zeroed),
        cmocka_unit_test(test_arena),              cmocka_unit_test(test_rng_reproducible_and_streams),
        cmocka_unit_test(test_rng_distribution),   cmocka_unit_test(test_sgemm_all_transposes),
        cmocka_unit_test(test_timer_monotonic),    cmocka_unit_test(test_denormals_flush),
        cmocka_unit_test(test_finite_and_sumsq_every_length),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
