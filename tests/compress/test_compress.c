/* compress/: MinMaxUInt8 bit for bit against docs/algorithms.md#minmaxuint8 (hand-made
 * vectors, a constant chunk, a chunk of length 1, the slow rint path), its error
 * bound and rejection of non-finite input; PowerSGD's exact reconstruction of a
 * rank-r matrix, M = P Q^T + E across calls, warm start and its 1-D pass-through. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bagpipe/compress.h"
#include "compress/codec.h"
#include "core/rng.h"

/* The formula of docs/algorithms.md#minmaxuint8 written plainly, as the reference, with the
 * clamp to [0, 255] that compress.h documents for where float rounding takes the
 * formula's value out of the byte's range (a cast would be undefined there). */
static void ref_encode(const float *x, size_t n, unsigned char *out) {
    float mn = x[0], mx = x[0];
    for (size_t i = 1; i < n; i++) {
        mn = fminf(mn, x[i]);
        mx = fmaxf(mx, x[i]);
    }
    float scale = 255.0f / (mx - mn + 1e-7f);
    float ub = rintf(mx * scale);
    float lb = ub - 255.0f;
    memcpy(out, &mn, 4);
    memcpy(out + 4, &mx, 4);
    for (size_t i = 0; i < n; i++)
        out[8 + i] = (uint8_t)fminf(fmaxf(fminf(rintf(x[i] * scale), ub) - lb, 0.0f), 255.0f);
}

static void ref_decode(const unsigned char *in, size_t n, float *x) {
    float mn, mx;
    memcpy(&mn, in, 4);
    memcpy(&mx, in + 4, 4);
    float scale = 255.0f / (mx - mn + 1e-7f);
    float lb = rintf(mx * scale) - 255.0f;
    for (size_t i = 0; i < n; i++) x[i] = ((float)in[8 + i] + lb) / scale;
}

/* The codec in the version named by the test's state ("plain", "sse2", "avx2");
 * the test is skipped where this build or processor lacks that version. */
static bp_codec *minmax(void **state) {
    const char *isa = *state;
    bp_codec *c = NULL;
    if (bp_codec_minmax_u8_new_isa(isa, &c, NULL) != BP_OK) skip();
    assert_string_equal(bp_codec_name(c), "minmax_u8");
    assert_string_equal(bp_codec_minmax_u8_isa(c), isa);
    return c;
}

/* Encode with the codec and with the reference; same bytes, same decoded floats. */
static void check_bit_exact(bp_codec *c, const float *x, size_t n) {
    size_t bytes = bp_codec_encoded_size(c, n);
    assert_int_equal(bytes, 8 + n);
    unsigned char *got = malloc(bytes), *want = malloc(bytes);
    float *dx = malloc(n * sizeof *dx), *rx = malloc(n * sizeof *rx);
    assert_int_equal(bp_codec_encode(c, x, n, got, NULL), BP_OK);
    ref_encode(x, n, want);
    assert_memory_equal(got, want, bytes);
    assert_int_equal(bp_codec_decode(c, got, n, dx, NULL), BP_OK);
    ref_decode(want, n, rx);
    assert_memory_equal(dx, rx, n * sizeof *dx);
    free(got), free(want), free(dx), free(rx);
}

static void test_minmax_hand_made(void **state) {
    bp_codec *c = minmax(state);
    /* mx - mn = 255 makes scale exactly 1 (1e-7 is below half an ulp of 255), so
     * the bytes are the values rounded half to even: 2.5 -> 2, 3.5 -> 4. */
    const float x[] = {0.0f, 255.0f, 2.5f, 3.5f, 0.5f, 1.5f, 100.25f};
    const unsigned char want_q[] = {0, 255, 2, 4, 0, 2, 100};
    unsigned char out[8 + 7];
    assert_int_equal(bp_codec_encode(c, x, 7, out, NULL), BP_OK);
    float mn, mx;
    memcpy(&mn, out, 4);
    memcpy(&mx, out + 4, 4);
    assert_true(mn == 0.0f && mx == 255.0f);
    assert_memory_equal(out + 8, want_q, 7);
    check_bit_exact(c, x, 7);
    /* [0, 1]: scale = 255 / (1 + 1e-7) just below 255; 0.5 * scale = 127.49998 -> 127. */
    const float y[] = {0.0f, 0.5f, 1.0f, 0.25f};
    assert_int_equal(bp_codec_encode(c, y, 4, out, NULL), BP_OK);
    const unsigned char want_y[] = {0, 127, 255, 64};
    assert_memory_equal(out + 8, want_y, 4);
    check_bit_exact(c, y, 4);
    const float neg[] = {-3.0f, -1.0f, -2.0f, -2.9f, -1.01f};
    check_bit_exact(c, neg, 5);
    bp_codec_destroy(c);
}

static void test_minmax_constant_and_single(void **state) {
    bp_codec *c = minmax(state);
    const float same[] = {3.5f, 3.5f, 3.5f};
    check_bit_exact(c, same, 3);
    const float one[] = {-2.25f};
    check_bit_exact(c, one, 1);
    float back[3];
    unsigned char out[8 + 3];
    assert_int_equal(bp_codec_encode(c, same, 3, out, NULL), BP_OK);
    assert_int_equal(bp_codec_decode(c, out, 3, back, NULL), BP_OK);
    for (int i = 0; i < 3; i++) assert_float_equal(back[i], 3.5f, 1e-6);
    assert_int_equal(bp_codec_encoded_size(c, 0), 0);
    bp_codec_destroy(c);
}

static void test_minmax_random_and_slow_path(void **state) {
    bp_codec *c = minmax(state);
    bp_rng rng;
    bp_rng_seed(&rng, 11, 0);
    enum { N = 4099 };
    float *x = malloc(N * sizeof *x), *back = malloc(N * sizeof *back);
    unsigned char *out = malloc(8 + N);
    /* Offsets of 2e6 and 1e7 put the scaled values past 2^22: the rintf path; at
     * 1e7 also past 2^24, where lb = ub - 255 is rounded and the clamp acts. */
    const float offsets[] = {0, 0, 0, 2e6f, 1e7f}, widths[] = {10, 10, 1e-3f, 10, 10};
    for (int trial = 0; trial < 5; trial++) {
        for (int i = 0; i < N; i++)
            x[i] = offsets[trial] + widths[trial] * (float)bp_rng_normal(&rng);
        check_bit_exact(c, x, N);
        assert_int_equal(bp_codec_encode(c, x, N, out, NULL), BP_OK);
        assert_int_equal(bp_codec_decode(c, out, N, back, NULL), BP_OK);
        float mn, mx;
        memcpy(&mn, out, 4);
        memcpy(&mx, out + 4, 4);
        /* Half a step of 1/scale, plus float spacing of the offset and of lb. */
        double bound = ((double)mx - mn + 1e-7) / 510.0 * 1.001 + 4e-7 * offsets[trial];
        for (int i = 0; i < N; i++) assert_true(fabs((double)back[i] - x[i]) <= bound);
    }
    free(x), free(back), free(out);
    bp_codec_destroy(c);
}

static void test_minmax_rejects_nonfinite(void **state) {
    bp_codec *c = minmax(state);
    enum { N = 4099 };
    float *x = calloc(N, sizeof *x);
    unsigned char *out = malloc(8 + N), *untouched = malloc(8 + N);
    memset(untouched, 0xAB, 8 + N);
    const float bad[] = {NAN, INFINITY, -INFINITY};
    const size_t where[] = {1, 100, N - 1};
    for (int k = 0; k < 3; k++) {
        memset(x, 0, N * sizeof *x);
        x[where[k]] = bad[k];
        memset(out, 0xAB, 8 + N);
        bp_err err;
        bp_err_clear(&err);
        assert_int_equal(bp_codec_encode(c, x, N, out, &err), BP_ENONFINITE);
        assert_memory_equal(out, untouched, 8 + N);
        assert_non_null(strstr(err.msg, "minmax_u8"));
        assert_non_null(strstr(err.msg, k == 0 ? "NaN" : "infinite"));
    }
    const float huge[] = {-3e38f, 3e38f};
    assert_int_equal(bp_codec_encode(c, huge, 2, out, NULL), BP_ENONFINITE);
    free(x), free(out), free(untouched);
    bp_codec_destroy(c);
}

/* --- PowerSGD ------------------------------------------------------------------------ */

static void fill_normal(float *x, size_t n, uint64_t seed) {
    bp_rng rng;
    bp_rng_seed(&rng, seed, 0);
    for (size_t i = 0; i < n; i++) x[i] = (float)bp_rng_normal(&rng);
}

/* Every version this machine has writes the bytes of the plain loops and decodes
 * to the same floats, for every length of tail after the vector loops, and writes
 * a zero range end as +0 whichever zero it met first. */
static void test_minmax_versions_agree(void **state) {
    (void)state;
    bp_codec *plain, *best;
    assert_int_equal(bp_codec_minmax_u8_new_isa("plain", &plain, NULL), BP_OK);
    assert_int_equal(bp_codec_minmax_u8_create(&best, NULL), BP_OK);
    enum { N = 1000 };
    float x[N], y0[N], y1[N];
    unsigned char w0[8 + N], w1[8 + N];
    fill_normal(x, N, 3);
    for (size_t n = 1; n <= N; n += n < 80 ? 1 : 37) {
        assert_int_equal(bp_codec_encode(plain, x, n, w0, NULL), BP_OK);
        assert_int_equal(bp_codec_encode(best, x, n, w1, NULL), BP_OK);
        assert_memory_equal(w0, w1, 8 + n);
        assert_int_equal(bp_codec_decode(plain, w0, n, y0, NULL), BP_OK);
        assert_int_equal(bp_codec_decode(best, w1, n, y1, NULL), BP_OK);
        assert_memory_equal(y0, y1, n * sizeof *y0);
    }
    float zeros[40];
    for (int i = 0; i < 40; i++) zeros[i] = i % 3 ? -0.0f : 0.0f;
    zeros[39] = 1.0f;
    assert_int_equal(bp_codec_encode(best, zeros, 40, w1, NULL), BP_OK);
    const float plus_zero = 0.0f;
    assert_memory_equal(w1, &plus_zero, 4);
    bp_codec_destroy(plain);
    bp_codec_destroy(best);
}

static double max_abs(const float *x, size_t n) {
    double m = 0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void test_powersgd_exact_low_rank(void **state) {
    (void)state;
    enum { R = 64, C = 48, K = 4 };
    float a[R * K], b[C * K], g[R * C], back[R * C];
    fill_normal(a, R * K, 1);
    fill_normal(b, C * K, 2);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < C; j++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)a[i * K + k] * b[j * K + k];
            g[i * C + j] = (float)s;
        }
    bp_codec *c = NULL;
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 7, &c, NULL), BP_OK);
    assert_true(bp_powersgd_compresses(c));
    size_t bytes = bp_codec_encoded_size(c, R * C);
    assert_int_equal(bytes, (R + C) * K * sizeof(float));
    unsigned char *wire = malloc(bytes);
    assert_int_equal(bp_codec_encode(c, g, R * C, wire, NULL), BP_OK);
    assert_int_equal(bp_codec_decode(c, wire, R * C, back, NULL), BP_OK);
    double scale = max_abs(g, R * C);
    for (int i = 0; i < R * C; i++) assert_true(fabs((double)back[i] - g[i]) <= 1e-4 * scale);
    assert_true(max_abs(bp_powersgd_error(c), R * C) <= 1e-4 * scale);
    free(wire);
    bp_codec_destroy(c);
}

/* Over several calls with warm start and full-rank input, M = G + E_before always
 * equals P Q^T + E_after. */
static void test_powersgd_error_feedback(void **state) {
    (void)state;
    enum { R = 40, C = 30, K = 3, N = R * C };
    bp_codec *c = NULL;
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 3, &c, NULL), BP_OK);
    float g[N], m[N], back[N];
    unsigned char *wire = malloc(bp_codec_encoded_size(c, N));
    double err_norm = 0;
    for (int call = 0; call < 4; call++) {
        fill_normal(g, N, 100 + call);
        const float *e = bp_powersgd_error(c);
        for (int i = 0; i < N; i++) m[i] = g[i] + e[i];
        assert_int_equal(bp_codec_encode(c, g, N, wire, NULL), BP_OK);
        assert_int_equal(bp_codec_decode(c, wire, N, back, NULL), BP_OK);
        for (int i = 0; i < N; i++) assert_true(fabs((double)back[i] + e[i] - m[i]) <= 1e-4);
        err_norm = max_abs(e, N);
    }
    assert_true(err_norm > 0.1); /* rank 3 cannot hold a random 40 x 30 matrix */
    free(wire);
    bp_codec_destroy(c);
}

static void test_powersgd_warm_start_and_seed(void **state) {
    (void)state;
    enum { R = 16, C = 12, K = 2, N = R * C };
    bp_codec *a = NULL, *b = NULL, *d = NULL;
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 5, &a, NULL), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 5, &b, NULL), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 6, &d, NULL), BP_OK);
    float g[N];
    fill_normal(g, N, 9);
    size_t bytes = bp_codec_encoded_size(a, N);
    unsigned char *wa = malloc(bytes), *wb = malloc(bytes), *wd = malloc(bytes);
    for (int call = 0; call < 2; call++) {
        assert_int_equal(bp_codec_encode(a, g, N, wa, NULL), BP_OK);
        assert_int_equal(bp_codec_encode(b, g, N, wb, NULL), BP_OK);
        assert_int_equal(bp_codec_encode(d, g, N, wd, NULL), BP_OK);
        assert_memory_equal(wa, wb, bytes);
        assert_memory_not_equal(wa, wd, bytes);
    }
    free(wa), free(wb), free(wd);
    bp_codec_destroy(a), bp_codec_destroy(b), bp_codec_destroy(d);
}

/* project / reproject / finish on one process give encode + decode's result. */
static void test_powersgd_steps_match_codec(void **state) {
    (void)state;
    enum { R = 20, C = 10, K = 2, N = R * C };
    bp_codec *a = NULL, *b = NULL;
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 8, &a, NULL), BP_OK);
    assert_int_equal(bp_codec_powersgd_create(R, C, K, 8, &b, NULL), BP_OK);
    float g[N], x[N], back[N], *p, *q;
    size_t p_len, q_len;
    fill_normal(g, N, 4);
    memcpy(x, g, sizeof g);
    assert_int_equal(bp_powersgd_reproject(a, &q, &q_len, NULL), BP_EUSAGE);
    assert_int_equal(bp_powersgd_project(a, x, N, &p, &p_len, NULL), BP_OK);
    assert_int_equal(p_len, R * K);
    assert_int_equal(bp_powersgd_reproject(a, &q, &q_len, NULL), BP_OK);
    assert_int_equal(q_len, C * K);
    assert_int_equal(bp_powersgd_finish(a, x, N, NULL), BP_OK);
    unsigned char *wire = malloc(bp_codec_encoded_size(b, N));
    assert_int_equal(bp_codec_encode(b, g, N, wire, NULL), BP_OK);
    assert_int_equal(bp_codec_decode(b, wire, N, back, NULL), BP_OK);
    for (int i = 0; i < N; i++) {
        assert_float_equal(x[i], back[i], 1e-5);
        assert_float_equal(bp_powersgd_error(a)[i], bp_powersgd_error(b)[i], 1e-5);
    }
    free(wire);
    bp_codec_destroy(a), bp_codec_destroy(b);
}

static void test_powersgd_1d_clamp_and_errors(void **state) {
    (void)state;
    bp_codec *c = NULL;
    assert_int_equal(bp_codec_powersgd_create(1, 50, 4, 1, &c, NULL), BP_OK);
    assert_false(bp_powersgd_compresses(c));
    assert_int_equal(bp_codec_encoded_size(c, 50), 50 * sizeof(float));
    float v[50], back[50];
    fill_normal(v, 50, 1);
    unsigned char wire[50 * sizeof(float)];
    assert_int_equal(bp_codec_encode(c, v, 50, wire, NULL), BP_OK);
    assert_int_equal(bp_codec_decode(c, wire, 50, back, NULL), BP_OK);
    assert_memory_equal(v, back, sizeof v);
    bp_codec_destroy(c);

    /* rank 10 on a 3 x 5 matrix is clamped to 3: full rank, exact. */
    assert_int_equal(bp_codec_powersgd_create(3, 5, 10, 1, &c, NULL), BP_OK);
    assert_int_equal(bp_powersgd_rank(c), 3);
    float g[15], g2[15];
    fill_normal(g, 15, 2);
    unsigned char w2[(3 + 5) * 3 * sizeof(float)];
    assert_int_equal(bp_codec_encoded_size(c, 15), sizeof w2);
    assert_int_equal(bp_codec_encode(c, g, 15, w2, NULL), BP_OK);
    assert_int_equal(bp_codec_decode(c, w2, 15, g2, NULL), BP_OK);
    for (int i = 0; i < 15; i++) assert_float_equal(g[i], g2[i], 1e-4);

    bp_err err;
    assert_int_equal(bp_codec_encode(c, g, 14, w2, &err), BP_EUSAGE);
    assert_non_null(strstr(err.msg, "3 x 5"));
    const float before = bp_powersgd_error(c)[0];
    g[7] = NAN;
    memset(w2, 0xAB, sizeof w2);
    assert_int_equal(bp_codec_encode(c, g, 15, w2, &err), BP_ENONFINITE);
    assert_non_null(strstr(err.msg, "value 7"));
    assert_true(w2[0] == 0xAB && w2[sizeof w2 - 1] == 0xAB);
    assert_true(bp_powersgd_error(c)[0] == before);
    bp_codec_destroy(c);
    assert_int_equal(bp_codec_powersgd_create(0, 5, 1, 1, &c, &err), BP_EUSAGE);
    assert_null(c);
}

/* MinMax with 4 and 2 bits: a range of 2^bits - 1 makes scale exactly 1, so the
 * codes are the values rounded half to even, packed low bits first. */
static void test_minmax_bits_hand_made(void **state) {
    (void)state;
    bp_codec *c;
    assert_int_equal(bp_codec_minmax_bits_create(4, &c, NULL), BP_OK);
    assert_string_equal(bp_codec_name(c), "minmax_u4");
    const float x[] = {0.0f, 15.0f, 2.5f, 3.5f, 7.0f, 8.0f, 1.0f};
    const unsigned char want4[] = {0xF0, 0x42, 0x87, 0x01};
    unsigned char out[16];
    float back[7];
    assert_int_equal(bp_codec_encoded_size(c, 7), 8 + 4);
    assert_int_equal(bp_codec_encode(c, x, 7, out, NULL), BP_OK);
    assert_memory_equal(out + 8, want4, 4);
    assert_int_equal(bp_codec_decode(c, out, 7, back, NULL), BP_OK);
    const float got4[] = {0.0f, 15.0f, 2.0f, 4.0f, 7.0f, 8.0f, 1.0f};
    assert_memory_equal(back, got4, sizeof got4);
    bp_codec_destroy(c);
    assert_int_equal(bp_codec_minmax_bits_create(2, &c, NULL), BP_OK);
    const float y[] = {0.0f, 3.0f, 1.0f, 2.0f, 1.5f};
    const unsigned char want2[] = {0x9C, 0x02};
    assert_int_equal(bp_codec_encoded_size(c, 5), 8 + 2);
    assert_int_equal(bp_codec_encode(c, y, 5, out, NULL), BP_OK);
    assert_memory_equal(out + 8, want2, 2);
    bp_codec_destroy(c);
    bp_err err;
    assert_int_equal(bp_codec_minmax_bits_create(3, &c, &err), BP_EUSAGE);
    assert_null(c);
}

/* Random chunks: every value within half a level, (mx - mn + 1e-7) / (2 L), of its
 * decoding (plus float rounding); NaN refused, nothing written. */
static void test_minmax_bits_random(void **state) {
    (void)state;
    enum { N = 1001 };
    float x[N], back[N];
    unsigned char out[8 + N];
    bp_rng r;
    bp_rng_seed(&r, 7, 0);
    for (int bits = 2; bits <= 4; bits += 2) {
        bp_codec *c;
        assert_int_equal(bp_codec_minmax_bits_create(bits, &c, NULL), BP_OK);
        float mn = INFINITY, mx = -INFINITY, L = (float)((1 << bits) - 1);
        for (int i = 0; i < N; i++) {
            x[i] = (float)(bp_rng_uniform(&r) * 6.0 - 2.0);
            mn = fminf(mn, x[i]), mx = fmaxf(mx, x[i]);
        }
        assert_int_equal(bp_codec_encode(c, x, N, out, NULL), BP_OK);
        assert_int_equal(bp_codec_decode(c, out, N, back, NULL), BP_OK);
        for (int i = 0; i < N; i++)
            assert_true(fabsf(back[i] - x[i]) <= (mx - mn + 1e-7f) / (2 * L) * 1.0001f);
        x[N / 2] = NAN;
        memset(out, 0xAB, sizeof out);
        bp_err err;
        assert_int_equal(bp_codec_encode(c, x, N, out, &err), BP_ENONFINITE);
        assert_true(out[0] == 0xAB && out[sizeof out - 1] == 0xAB);
        bp_codec_destroy(c);
    }
}

/* Top-k: the k largest magnitudes (a tie goes to the lower index) come back at
 * their places within a 2-bit level of their values, the rest as zeros. */
static void test_topk(void **state) {
    (void)state;
    bp_codec *c;
    assert_int_equal(bp_codec_topk_create(0.25, &c, NULL), BP_OK);
    assert_string_equal(bp_codec_name(c), "topk_u2");
    /* k = 3 of 12: -3 (index 2), 3 (index 5), 2.9 (index 6; the 2.9 at 9 loses the tie). */
    const float x[12] = {0.1f, 1.0f, -3.0f, 0.0f, -0.5f, 3.0f, 2.9f, 0.2f, 1.5f, 2.9f, -1.0f, 0};
    unsigned char out[64];
    float back[12];
    assert_int_equal(bp_codec_encoded_size(c, 12), 3 * 4 + 8 + 1);
    assert_int_equal(bp_codec_encode(c, x, 12, out, NULL), BP_OK);
    uint32_t idx[3];
    memcpy(idx, out, sizeof idx);
    assert_true(idx[0] == 2 && idx[1] == 5 && idx[2] == 6);
    assert_int_equal(bp_codec_decode(c, out, 12, back, NULL), BP_OK);
    for (int i = 0; i < 12; i++) {
        bool kept = i == 2 || i == 5 || i == 6;
        if (kept) assert_true(fabsf(back[i] - x[i]) <= 6.0f / 6 * 1.0001f);
        else assert_true(back[i] == 0.0f);
    }
    assert_int_equal(bp_codec_encoded_size(c, 0), 0);
    assert_int_equal(bp_codec_encoded_size(c, 1), 4 + 8 + 1); /* at least one value */
    bp_codec_destroy(c);
    bp_err err;
    assert_int_equal(bp_codec_topk_create(0, &c, &err), BP_EUSAGE);
    assert_int_equal(bp_codec_topk_create(1.5, &c, &err), BP_EUSAGE);
}

int main(void) {
    const struct CMUnitTest tests[] = {
#define FOR_EACH_ISA(t)                                                                   \
    cmocka_unit_test_prestate(t, "plain"), cmocka_unit_test_prestate(t, "sse2"),           \
        cmocka_unit_test_prestate(t, "avx2")
        FOR_EACH_ISA(test_minmax_hand_made),
        FOR_EACH_ISA(test_minmax_constant_and_single),
        FOR_EACH_ISA(test_minmax_random_and_slow_path),
        FOR_EACH_ISA(test_minmax_rejects_nonfinite),
        cmocka_unit_test(test_minmax_versions_agree),
        cmocka_unit_test(test_powersgd_exact_low_rank),
        cmocka_unit_test(test_powersgd_error_feedback),
        cmocka_unit_test(test_powersgd_warm_start_and_seed),
        cmocka_unit_test(test_powersgd_steps_match_codec),
        cmocka_unit_test(test_powersgd_1d_clamp_and_errors),
        cmocka_unit_test(test_minmax_bits_hand_made),
        cmocka_unit_test(test_minmax_bits_random),
        cmocka_unit_test(test_topk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
