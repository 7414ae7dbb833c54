/* Codecs on an emulated device (compress/codec.h, bp_backend.codec_pass): the device
 * takes each pass for the time the cost model prices it at (the MinMax codecs' passes
 * over the bytes, PowerSGD's products and its passes over M), dilated, whichever
 * version of the codec's loops the host has (its speed never enters the device's
 * time), and what the codec writes is, bit for bit, what the host's codec writes
 * for the zeros an emulated device shows the host. Times are the device's, on a
 * virtual clock: nothing here depends on the machine's speed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "compress/codec.h"
#include "core/backend_emu.h"

#define DILATION 4.0
#define FLOPS 1e12
#define MEM_BPS 1e9
#define LAUNCH_S 1e-6

static const bp_device_sheet sheet = {.name = "test", .title = "Test-GPU", .fp32_flops = FLOPS,
                                      .tf32_flops = FLOPS, .mem_Bps = MEM_BPS, .mem_bytes = 1e9,
                                      .launch_s = LAUNCH_S, .host_Bps = 1e9};

/* The virtual clock: sleeping until u sets the time to u. */
static double v_now(void *ctx) { return *(double *)ctx; }
static void v_sleep(void *ctx, double u) {
    double *t = ctx;
    if (u > *t) *t = u;
}

static bp_backend *device(double *clock) {
    bp_emu_config cfg = {.sheet = &sheet,
                         .rate = {.flops = FLOPS, .mem_Bps = MEM_BPS, .efficiency = 1,
                                  .launch_s = LAUNCH_S},
                         .dilation = DILATION,
                         .clock = {v_now, v_sleep, clock}};
    bp_backend *be = NULL;
    bp_err err;
    assert_int_equal(bp_backend_emu_create(&cfg, &be, &err), BP_OK);
    return be;
}

/* Kernels of the modeled time of `flops` and `bytes` each. */
static double kernel_s(double flops, double bytes) {
    double c = flops / FLOPS, m = bytes / MEM_BPS;
    return LAUNCH_S + (c > m ? c : m);
}

/* The device's time of what ran since `t0` and its modeled work, both `want`: the
 * host waited for each pass, dilated. */
static void assert_took(const bp_backend *be, const double *clock, double t0, double work0,
                        double want) {
    assert_true(fabs(*clock - t0 - DILATION * want) < 1e-12);
    assert_true(fabs(bp_backend_emu_work_s(be) - work0 - want) < 1e-12);
}

#define N 1001 /* odd: MinMax u4's last byte holds one code */

/* host and dev: the same codec, dev on the device. */
static void minmax_takes_the_device_time_and_writes_the_hosts_bits(bp_codec *host, bp_codec *dev) {
    bp_err err;
    double clock = 0;
    bp_backend *be = device(&clock);
    bp_codec_set_backend(dev, be);
    float *zeros = calloc(N, sizeof *zeros), *x = malloc(N * sizeof *x);
    size_t bytes = bp_codec_encoded_size(host, N);
    unsigned char *want = malloc(bytes), *got = malloc(bytes);
    assert_int_equal(bp_codec_encode(host, zeros, N, want, &err), BP_OK);

    /* The input is not read: the device's values are zeros wherever the host sees them. */
    memset(got, 0x5a, bytes);
    assert_int_equal(bp_codec_encode(dev, zeros, N, got, &err), BP_OK);
    assert_memory_equal(got, want, bytes);
    assert_took(be, &clock, 0, 0, kernel_s(0, 2.25 * 4 * N));

    double t0 = clock, w0 = bp_backend_emu_work_s(be);
    memset(x, 0x5a, N * sizeof *x);
    assert_int_equal(bp_codec_decode(dev, got, N, x, &err), BP_OK);
    assert_memory_equal(x, zeros, N * sizeof *x);
    assert_took(be, &clock, t0, w0, kernel_s(0, 1.25 * 4 * N));

    bp_backend_emu_destroy(be);
    bp_codec_destroy(host);
    bp_codec_destroy(dev);
    free(zeros), free(x), free(want), free(got);
}

static void minmax_u8(void **state) {
    (void)state;
    /* Every version of the host's loops, one device time. */
    const char *isa[] = {"plain", "sse2", "avx2"};
    for (int i = 0; i < 3; i++) {
        bp_codec *host, *dev;
        bp_err err;
        if (bp_codec_minmax_u8_new_isa(isa[i], &host, &err) != BP_OK) continue; /* not here */
        assert_int_equal(bp_codec_minmax_u8_new_isa(isa[i], &dev, &err), BP_OK);
        minmax_takes_the_device_time_and_writes_the_hosts_bits(host, dev);
    }
}

/* DiLoCo's outer codecs, priced as MinMaxUInt8. */
static void minmax_bits(void **state) {
    (void)state;
    for (int bits = 2; bits <= 4; bits += 2) {
        bp_codec *host, *dev;
        bp_err err;
        assert_int_equal(bp_codec_minmax_bits_create(bits, &host, &err), BP_OK);
        assert_int_equal(bp_codec_minmax_bits_create(bits, &dev, &err), BP_OK);
        minmax_takes_the_device_time_and_writes_the_hosts_bits(host, dev);
    }
}

/* PowerSGD's steps as comm/'s allreduce runs them, on the host and on the device. */
#define ROWS 40
#define COLS 25
#define RANK 3

static void run_steps(bp_codec *c, float *grad, float **p, float **q) {
    bp_err err;
    size_t p_len, q_len;
    assert_int_equal(bp_powersgd_orthogonalize_q(c, &err), BP_OK);
    assert_int_equal(bp_powersgd_project(c, grad, ROWS * COLS, p, &p_len, &err), BP_OK);
    assert_int_equal(p_len, ROWS * RANK);
    assert_int_equal(bp_powersgd_reproject(c, q, &q_len, &err), BP_OK);
    assert_int_equal(q_len, COLS * RANK);
}

static void powersgd_steps(void **state) {
    (void)state;
    bp_codec *host, *dev;
    bp_err err;
    assert_int_equal(bp_codec_powersgd_create(ROWS, COLS, RANK, 7, &host, &err), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(ROWS, COLS, RANK, 7, &dev, &err), BP_OK);
    double clock = 0;
    bp_backend *be = device(&clock);
    bp_codec_set_backend(dev, be);
    size_t n = ROWS * COLS;
    float *gh = calloc(n, sizeof *gh), *gd = calloc(n, sizeof *gd);
    float *ph, *qh, *pd, *qd;
    run_steps(host, gh, &ph, &qh);
    run_steps(dev, gd, &pd, &qd);
    assert_memory_equal(pd, ph, ROWS * RANK * sizeof *pd);
    assert_memory_equal(qd, qh, COLS * RANK * sizeof *qd);
    for (size_t i = 0; i < n; i++) gd[i] = 1.0f; /* overwritten as the host's are */
    assert_int_equal(bp_powersgd_finish(host, gh, n, &err), BP_OK);
    assert_int_equal(bp_powersgd_finish(dev, gd, n, &err), BP_OK);
    assert_memory_equal(gd, gh, n * sizeof *gd);
    assert_memory_equal(bp_powersgd_error(dev), bp_powersgd_error(host), n * sizeof(float));

    /* Q's orthonormalization, M += G and P = M Q, P's and Q = M^T P, P Q^T and M -= it. */
    double product = 2.0 * ROWS * COLS * RANK, matrix = 3.0 * 4 * (double)n;
    double want = kernel_s(2.0 * COLS * RANK * RANK, 0) + kernel_s(0, matrix) +
                  kernel_s(product, 0) + kernel_s(2.0 * ROWS * RANK * RANK + product, 0) +
                  kernel_s(product, 0) + kernel_s(0, matrix);
    assert_took(be, &clock, 0, 0, want);

    /* Encode and decode, whole (Optimus-CC's path): the same bytes and zeros. */
    size_t bytes = bp_codec_encoded_size(host, n);
    float *wh = malloc(bytes), *wd = malloc(bytes);
    assert_int_equal(bp_codec_encode(host, gh, n, wh, &err), BP_OK);
    assert_int_equal(bp_codec_encode(dev, gd, n, wd, &err), BP_OK);
    assert_memory_equal(wd, wh, bytes);
    assert_int_equal(bp_codec_decode(dev, wd, n, gd, &err), BP_OK);
    assert_int_equal(bp_codec_decode(host, wh, n, gh, &err), BP_OK);
    assert_memory_equal(gd, gh, n * sizeof *gd);

    bp_backend_emu_destroy(be);
    bp_codec_destroy(host);
    bp_codec_destroy(dev);
    free(gh), free(gd), free(wh), free(wd);
}

/* On the cpu backend the host computes: the same bits as without a backend. */
static void cpu_backend_computes_on_the_host(void **state) {
    (void)state;
    bp_codec *c;
    bp_err err;
    assert_int_equal(bp_codec_minmax_u8_create(&c, &err), BP_OK);
    bp_codec_set_backend(c, bp_backend_cpu());
    float x[4] = {-1.0f, 0.5f, 2.0f, 0.25f}, y[4];
    unsigned char wire[4 + 8];
    assert_int_equal(bp_codec_encode(c, x, 4, wire, &err), BP_OK);
    assert_int_equal(bp_codec_decode(c, wire, 4, y, &err), BP_OK);
    assert_true(y[0] < -0.99f && y[2] > 1.99f);
    bp_codec_destroy(c);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(minmax_u8),
        cmocka_unit_test(minmax_bits),
        cmocka_unit_test(powersgd_steps),
        cmocka_unit_test(cpu_backend_computes_on_the_host),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
