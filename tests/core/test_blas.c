/* core/blas.h: every library the build has computes the same products (within
 * rounding), and --matmul auto measures a shape once and keeps its choice in the
 * machine's file. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/blas.h"
#include "core/file.h"
#include "core/rng.h"

enum { M = 37, N = 29, K = 70, PAD = 3 };

/* Normal values; bf16 ones (the low 16 bits cleared) when bf16 is set. */
static void fill(float *x, size_t n, uint64_t seed, bool bf16) {
    bp_rng r;
    bp_rng_seed(&r, seed, 0);
    for (size_t i = 0; i < n; i++) {
        x[i] = (float)bp_rng_normal(&r);
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        u &= bf16 ? 0xffff0000u : 0xffffffffu;
        memcpy(&x[i], &u, sizeof u);
    }
}

/* C = 1.5 op(A) op(B) - 0.5 C on row strides PAD wider than the matrices; the
 * padding of C must stay as it was. bf16: the factors hold bf16 values and the
 * product is told so (bp_blas_bf16_inputs). */
static void check_product(bool ta, bool tb, bool bf16) {
    int lda = (ta ? M : K) + PAD, ldb = (tb ? K : N) + PAD, ldc = N + PAD;
    float A[(K + PAD) * (M + PAD)], B[(K + PAD) * (N + PAD)], C[M * (N + PAD)], C0[M * (N + PAD)];
    fill(A, sizeof A / sizeof *A, 1, bf16);
    fill(B, sizeof B / sizeof *B, 2, bf16);
    fill(C0, sizeof C0 / sizeof *C0, 3, false);
    memcpy(C, C0, sizeof C);
    bp_blas_bf16_inputs(bf16);
    bp_sgemm(ta, tb, M, N, K, 1.5f, A, lda, B, ldb, -0.5f, C, ldc);
    bp_blas_bf16_inputs(false);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N + PAD; j++) {
            if (j >= N) {
                assert_true(C[i * ldc + j] == C0[i * ldc + j]);
                continue;
            }
            double acc = 0;
            for (int k = 0; k < K; k++)
                acc += (double)(ta ? A[k * lda + i] : A[i * lda + k]) *
                       (tb ? B[j * ldb + k] : B[k * ldb + j]);
            double want = 1.5 * acc - 0.5 * C0[i * ldc + j];
            assert_true(fabs(C[i * ldc + j] - want) < 1e-4 * (1 + fabs(want)));
        }
}

static void test_every_library_every_transpose(void **state) {
    (void)state;
    bp_err err;
    for (int lib = 0; lib < BP_BLAS_LIBS; lib++) {
        if (!bp_blas_available((bp_blas_lib)lib)) {
            assert_int_equal(bp_blas_select((bp_blas_lib)lib, "", "option --matmul", &err),
                             BP_EUSAGE);
            assert_non_null(strstr(err.msg, bp_blas_name((bp_blas_lib)lib)));
            continue;
        }
        assert_int_equal(bp_blas_select((bp_blas_lib)lib, "", "option --matmul", &err), BP_OK);
        for (int t = 0; t < 4; t++) check_product(t & 1, t & 2, false);
    }
    assert_int_equal(bp_blas_select(BP_BLAS_OPENBLAS, "", "option --matmul", &err), BP_OK);
}

/* Products on bf16 factors: on the CPU's bf16 instructions where it has them (exact
 * products, fp32 sums), else in fp32; the same values either way, within the sums'
 * rounding, whatever the transposes, strides and alpha, beta; a later product on
 * fp32 factors is an fp32 one again. */
static void test_bf16_factors(void **state) {
    (void)state;
    print_message("bf16 products on this CPU's bf16 instructions: %s\n",
                  bp_blas_bf16_native() ? "yes" : "no");
    for (int t = 0; t < 4; t++) check_product(t & 1, t & 2, true);
    check_product(false, true, false);
}

/* One bf16 product, A [M, K] B [K, N] -> C [M, N], as the models run it. */
static void *bf16_product(void *C) {
    float A[M * K], B[K * N];
    fill(A, M * K, 1, true);
    fill(B, K * N, 2, true);
    bp_blas_bf16_inputs(true);
    bp_sgemm(false, false, M, N, K, 1, A, K, B, N, 0, C, N);
    bp_blas_bf16_inputs(false);
    return NULL;
}

/* Threads that run bf16 products and exit: each gets the main thread's result (the
 * same library on the same shape), and what each kept for them (oneDNN's engine,
 * stream and primitives) goes with it, which the sanitizer build's leak check sees. */
static void test_bf16_on_threads_that_exit(void **state) {
    (void)state;
    float want[M * N], got[M * N];
    bf16_product(want);
    for (int i = 0; i < 3; i++) {
        pthread_t t;
        memset(got, 0, sizeof got);
        assert_int_equal(pthread_create(&t, NULL, bf16_product, got), 0);
        assert_int_equal(pthread_join(t, NULL), 0);
        assert_memory_equal(got, want, sizeof got);
    }
}

static char *only_file(const char *dir) {
    char cmd[256];
    snprintf(cmd, sizeof cmd, "ls %s/matmul-*.txt", dir);
    FILE *p = popen(cmd, "r");
    static char path[256];
    assert_non_null(p);
    assert_non_null(fgets(path, sizeof path, p));
    pclose(p);
    path[strcspn(path, "\n")] = '\0';
    return path;
}

/* The first product of a shape is measured and written down; the file, edited to
 * another library, is what the next selection follows. */
static void test_auto_measures_once_and_keeps_it(void **state) {
    (void)state;
    char dir[] = "/tmp/bp_test_blas_XXXXXX";
    assert_non_null(mkdtemp(dir));
    bp_err err;
    assert_int_equal(bp_blas_select(BP_BLAS_AUTO, dir, "option --matmul", &err), BP_OK);
    check_product(false, true, false);
    char *path = only_file(dir);
    bp_bytes b;
    assert_int_equal(bp_read_file(path, &b, &err), BP_OK);
    char line[128];
    snprintf(line, sizeof line, "0 1 %d %d %d %d %d %d ", M, N, K, K + PAD, K + PAD, N + PAD);
    assert_true(b.n > strlen(line) && memcmp(b.data, line, strlen(line)) == 0);
    free(b.data);

    bp_blas_lib other = bp_blas_available(BP_BLAS_DNNL)   ? BP_BLAS_DNNL
                        : bp_blas_available(BP_BLAS_BLIS) ? BP_BLAS_BLIS
                                                          : BP_BLAS_OPENBLAS;
    char text[256];
    /* Another run's shape, never multiplied here: not counted as this run's. */
    int n = snprintf(text, sizeof text, "%s%s\nnot a shape\n1 0 3 5 7 3 5 5 %s\n", line,
                     bp_blas_name(other), bp_blas_name(other));
    assert_int_equal(bp_write_file_atomic(path, text, (size_t)n, &err), BP_OK);
    assert_int_equal(bp_blas_select(BP_BLAS_AUTO, dir, "option --matmul", &err), BP_OK);
    char what[128], want[128];
    bp_blas_describe(what, sizeof what);
    assert_string_equal(what, "auto (no products yet)");
    check_product(false, true, false); /* known: runs on `other`, measures nothing */
    snprintf(want, sizeof want, "auto (%s 1 shapes)", bp_blas_name(other));
    bp_blas_describe(what, sizeof what);
    assert_string_equal(what, want);
    assert_int_equal(bp_blas_select(BP_BLAS_OPENBLAS, "", "option --matmul", &err), BP_OK);
    unlink(path);
    rmdir(dir);
}

int main(void) {
    bp_blas_set_threads(1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_library_every_transpose),
        cmocka_unit_test(test_auto_measures_once_and_keeps_it),
        cmocka_unit_test(test_bf16_factors),
        cmocka_unit_test(test_bf16_on_threads_that_exit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
