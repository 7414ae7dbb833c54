/* The GPU codecs (compress/cuda/codec_cuda.h) against the CPU codecs:
 *   - MinMaxUInt8: the encoded bytes and the decoded floats are the CPU's, bit for bit,
 *     for lengths around the vector width, aligned and unaligned inputs, small and
 *     large magnitudes (the CPU's magic-number and rintf paths) and a constant chunk;
 *     a NaN and an overflowing range fail with the CPU's message;
 *   - PowerSGD: P, Q, the approximation and the error feedback over three steps within
 *     1e-4 relative (same seed, so the same initial Q).
 * Skipped (77) without a GPU. */
#include "bagpipe/compress.h"
#include "compress/cuda/codec_cuda.h"
#include "cuda_test.h"

static int failures;

static void fail_if(int bad, const char *fmt, const char *what, size_t n) {
    printf(fmt, what, n);
    printf("%s\n", bad ? "  FAIL" : "");
    failures += bad;
}

static void minmax_case(bp_cuda *c, bp_cu_minmax *mm, const char *what, const float *x, size_t n,
                        size_t offset) {
    bp_err err = {0};
    bp_codec *cpu;
    cu_ok(bp_codec_minmax_u8_create(&cpu, &err), &err);
    size_t bytes = bp_codec_encoded_size(cpu, n);
    unsigned char *want = malloc(bytes), *got = malloc(bytes);
    float *dec_cpu = cu_host(n), *dec_gpu;
    cu_ok(bp_codec_encode(cpu, x, n, want, &err), &err);
    cu_ok(bp_codec_decode(cpu, want, n, dec_cpu, &err), &err);
    /* offset floats into the device buffer: an unaligned start takes the scalar path */
    float *xd = cu_up32(c, NULL, n + offset);
    cu_ok(bp_cuda_upload(c, xd + offset, x, n * sizeof *x, &err), &err);
    void *wire;
    float *outd = cu_up32(c, NULL, n);
    cu_ok(bp_cuda_alloc(c, &wire, bytes, "wire", &err), &err);
    cu_ok(bp_cu_minmax_encode(mm, xd + offset, n, wire, &err), &err);
    cu_ok(bp_cuda_download(c, got, wire, bytes, &err), &err);
    fail_if(memcmp(got, want, bytes) != 0, "minmax_u8 %-28s n=%-8zu encoded bytes equal", what, n);
    bp_cu_minmax_decode(mm, wire, n, outd);
    dec_gpu = cu_down(c, BP_CUDA_F32, outd, n);
    fail_if(memcmp(dec_gpu, dec_cpu, n * sizeof *dec_cpu) != 0,
            "minmax_u8 %-28s n=%-8zu decoded floats equal", what, n);
    bp_cuda_free(xd);
    bp_cuda_free(outd);
    bp_cuda_free(wire);
    free(dec_gpu);
    free(dec_cpu);
    free(got);
    free(want);
    bp_codec_destroy(cpu);
}

/* The GPU's message for a bad chunk is the CPU's. */
static void minmax_reject(bp_cuda *c, bp_cu_minmax *mm, const char *what, const float *x, size_t n) {
    bp_err ec = {0}, eg = {0};
    bp_codec *cpu;
    cu_ok(bp_codec_minmax_u8_create(&cpu, &ec), &ec);
    unsigned char *buf = malloc(bp_codec_encoded_size(cpu, n));
    int rc = bp_codec_encode(cpu, x, n, buf, &ec);
    float *xd = cu_up32(c, x, n);
    void *wire;
    cu_ok(bp_cuda_alloc(c, &wire, n + 8, "wire", &eg), &eg);
    int rg = bp_cu_minmax_encode(mm, xd, n, wire, &eg);
    int bad = rc == BP_OK || rg != rc || strcmp(ec.msg, eg.msg) != 0;
    printf("minmax_u8 %-28s rejected: '%s'%s\n", what, eg.msg, bad ? "  FAIL" : "");
    failures += bad;
    bp_cuda_free(xd);
    bp_cuda_free(wire);
    free(buf);
    bp_codec_destroy(cpu);
}

static void minmax(bp_cuda *c) {
    bp_err err = {0};
    bp_cu_minmax *mm;
    cu_ok(bp_cu_minmax_new(c, &mm, &err), &err);
    size_t sizes[] = {1, 3, 4, 5, 1000, 1001, 65537, (1u << 20) + 7};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        float *x = cu_normal(n, 0.01, 100 + k);
        minmax_case(c, mm, "normal", x, n, 0);
        minmax_case(c, mm, "normal, unaligned", x, n, 1);
        for (size_t i = 0; i < n; i++) x[i] += 1e6f; /* |x| * scale > 2^22: rintf path */
        minmax_case(c, mm, "large magnitude", x, n, 0);
        for (size_t i = 0; i < n; i++) x[i] = 0.375f;
        minmax_case(c, mm, "constant", x, n, 0);
        free(x);
    }
    float *x = cu_normal(4096, 1, 200);
    x[1234] = NAN;
    minmax_reject(c, mm, "a NaN", x, 4096);
    x[1234] = 3e38f;
    x[17] = -3e38f;
    minmax_reject(c, mm, "an overflowing range", x, 4096);
    free(x);
    bp_cu_minmax_destroy(mm);
}

static void powersgd(bp_cuda *c) {
    enum { ROWS = 96, COLS = 40, RANK = 4 };
    bp_err err = {0};
    bp_codec *cpu;
    bp_cu_powersgd *gpu;
    cu_ok(bp_codec_powersgd_create(ROWS, COLS, RANK, 9, &cpu, &err), &err);
    cu_ok(bp_cu_powersgd_new(c, ROWS, COLS, RANK, 9, &gpu, &err), &err);
    size_t n = ROWS * COLS;
    for (int step = 0; step < 3; step++) {
        float *g = cu_normal(n, 1, 300 + (uint64_t)step), *gd = cu_up32(c, g, n);
        float *p, *q, *pd, *qd;
        size_t pl, ql;
        cu_ok(bp_powersgd_project(cpu, g, n, &p, &pl, &err), &err);
        cu_ok(bp_cu_powersgd_project(gpu, gd, n, &pd, &err), &err);
        cu_ok(bp_powersgd_reproject(cpu, &q, &ql, &err), &err);
        cu_ok(bp_cu_powersgd_reproject(gpu, &qd, &err), &err);
        float *hp = cu_down(c, BP_CUDA_F32, pd, pl), *hq = cu_down(c, BP_CUDA_F32, qd, ql);
        failures += cu_check("powersgd P (orthonormal)", BP_CUDA_F32, hp, p, pl);
        failures += cu_check("powersgd Q", BP_CUDA_F32, hq, q, ql);
        cu_ok(bp_powersgd_finish(cpu, g, n, &err), &err);
        cu_ok(bp_cu_powersgd_finish(gpu, gd, n, &err), &err);
        float *hg = cu_down(c, BP_CUDA_F32, gd, n);
        float *he = cu_down(c, BP_CUDA_F32, bp_cu_powersgd_error(gpu), n);
        failures += cu_check("powersgd P Q^T", BP_CUDA_F32, hg, g, n);
        failures += cu_check("powersgd error feedback", BP_CUDA_F32, he, bp_powersgd_error(cpu), n);
        free(hp);
        free(hq);
        free(hg);
        free(he);
        free(g);
        bp_cuda_free(gd);
    }
    /* out of order: the CPU codec's message */
    float *q;
    int rc = bp_cu_powersgd_reproject(gpu, &q, &err);
    int bad = rc != BP_EUSAGE || !strstr(err.msg, "reproject out of order (project comes next)");
    printf("powersgd out of order: '%s'%s\n", err.msg, bad ? "  FAIL" : "");
    failures += bad;
    bp_cu_powersgd_destroy(gpu);
    bp_codec_destroy(cpu);
}

int main(void) {
    cu_require_gpu();
    bp_cuda *c = cu_context();
    minmax(c);
    powersgd(c);
    bp_cuda_destroy(c);
    printf("%d comparison(s) failed\n", failures);
    return failures ? 1 : 0;
}
