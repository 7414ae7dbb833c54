/* PowerSGD (compress.h has the algorithm and the wire format).
 *
 * One buffer `m` holds the error feedback E between calls and M = G + E during
 * one, so the state costs one matrix, not two. The steps must come in order
 * project -> reproject -> finish (or all three inside encode); `stage` checks it,
 * because a step out of order would silently use a stale P or Q. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "core/blas.h"
#include "core/buf.h"
#include "core/rng.h"

typedef enum stage { IDLE, PROJECTED, REPROJECTED } stage;

typedef struct powersgd {
    bp_codec base;
    size_t rows, cols;
    int rank;
    float *m; /* E, or M within a step: rows x cols */
    float *p; /* rows x rank */
    float *q; /* cols x rank */
    stage at;
} powersgd;

static const bp_codec_ops powersgd_ops;

static bool is_2d(const powersgd *s) { return s->rows > 1 && s->cols > 1; }

/* The codec as PowerSGD in the order of steps `want`, or BP_EUSAGE. */
static bp_status as_powersgd(bp_codec *c, stage want, powersgd **out, bp_err *err) {
    static const char *names[] = {"project", "reproject", "finish"};
    if (c->ops != &powersgd_ops) return bp_fail(err, BP_EUSAGE, "%s is not powersgd", c->ops->name);
    powersgd *s = (powersgd *)c;
    if (!is_2d(s))
        return bp_fail(err, BP_EUSAGE, "powersgd: a %zu x %zu tensor is 1-D and not compressed",
                       s->rows, s->cols);
    if (s->at != want)
        return bp_fail(err, BP_EUSAGE, "powersgd: %s out of order (%s comes next)", names[want],
                       names[s->at]);
    *out = s;
    return BP_OK;
}

static bp_status check_length(const powersgd *s, size_t n, bp_err *err) {
    if (n == s->rows * s->cols) return BP_OK;
    return bp_fail(err, BP_EUSAGE, "powersgd: made for %zu x %zu = %zu values, given %zu", s->rows,
                   s->cols, s->rows * s->cols, n);
}

/* A device's passes (codec.h): the products' flops, and M += G or M -= P Q^T, which
 * read two matrices and write one. On zeros M stays E = 0, and P, Q and P Q^T are
 * zero. */
static double product_flops(const powersgd *s, size_t inner) {
    return 2.0 * (double)s->rows * (double)s->cols * (double)inner;
}
static bool on_device(const powersgd *s, double flops, double matrices) {
    return bp_codec_on_device(&s->base, flops,
                              matrices * 3.0 * (double)(s->rows * s->cols) * sizeof(float));
}

static bp_status check_input(const powersgd *s, const float *g, size_t n, bp_err *err) {
    bp_status rc = check_length(s, n, err);
    if (rc == BP_OK && !bp_all_finite(g, n)) rc = bp_codec_reject_nonfinite("powersgd", g, n, err);
    return rc;
}

/* Modified Gram-Schmidt on the columns of P (row-major rows x rank), sums in
 * double. A column that is (numerically) zero stays zero: it carries nothing. */
static void orthonormalize(float *p, size_t rows, int rank) {
    for (int j = 0; j < rank; j++) {
        for (int k = 0; k < j; k++) {
            double dot = 0;
            for (size_t i = 0; i < rows; i++) dot += (double)p[i * rank + j] * p[i * rank + k];
            for (size_t i = 0; i < rows; i++) p[i * rank + j] -= (float)dot * p[i * rank + k];
        }
        double norm = 0;
        for (size_t i = 0; i < rows; i++) norm += (double)p[i * rank + j] * p[i * rank + j];
        float inv = norm > 1e-30 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t i = 0; i < rows; i++) p[i * rank + j] *= inv;
    }
}

bp_status bp_powersgd_orthogonalize_q(bp_codec *c, bp_err *err) {
    powersgd *s;
    bp_status rc = as_powersgd(c, IDLE, &s, err);
    if (rc != BP_OK) return rc;
    /* Q is the codec's own state, not the device's values: kept exact on the host
     * (cols x rank, small) while the device takes the pass's time. */
    bp_codec_on_device(c, 2.0 * (double)s->cols * s->rank * s->rank, 0);
    orthonormalize(s->q, s->cols, s->rank);
    return BP_OK;
}

bp_status bp_powersgd_project(bp_codec *c, const float *grad, size_t n, float **p, size_t *p_len,
                              bp_err *err) {
    powersgd *s;
    bp_status rc = as_powersgd(c, IDLE, &s, err);
    if (rc == BP_OK) rc = check_length(s, n, err);
    if (rc != BP_OK) return rc;
    /* Two passes on a device (both or neither): M += G, then P = M Q. */
    if (on_device(s, 0, 1) && on_device(s, product_flops(s, (size_t)s->rank), 0)) {
        memset(s->p, 0, s->rows * (size_t)s->rank * sizeof *s->p);
    } else {
        if ((rc = check_input(s, grad, n, err))) return rc;
        for (size_t i = 0; i < n; i++) s->m[i] += grad[i];
        bp_sgemm(false, false, (int)s->rows, s->rank, (int)s->cols, 1.0f, s->m, (int)s->cols, s->q,
                 s->rank, 0.0f, s->p, s->rank);
    }
    s->at = PROJECTED;
    *p = s->p;
    *p_len = s->rows * (size_t)s->rank;
    return BP_OK;
}

bp_status bp_powersgd_reproject(bp_codec *c, float **q, size_t *q_len, bp_err *err) {
    powersgd *s;
    bp_status rc = as_powersgd(c, PROJECTED, &s, err);
    if (rc != BP_OK) return rc;
    double ortho = 2.0 * (double)s->rows * s->rank * s->rank;
    if (on_device(s, ortho + product_flops(s, (size_t)s->rank), 0)) {
        memset(s->q, 0, s->cols * (size_t)s->rank * sizeof *s->q);
    } else {
        orthonormalize(s->p, s->rows, s->rank);
        bp_sgemm(true, false, (int)s->cols, s->rank, (int)s->rows, 1.0f, s->m, (int)s->cols, s->p,
                 s->rank, 0.0f, s->q, s->rank);
    }
    s->at = REPROJECTED;
    *q = s->q;
    *q_len = s->cols * (size_t)s->rank;
    return BP_OK;
}

/* out = P Q^T (rows x cols). */
static void low_rank(const powersgd *s, const float *p, const float *q, float *out) {
    bp_sgemm(false, true, (int)s->rows, (int)s->cols, s->rank, 1.0f, p, s->rank, q, s->rank, 0.0f,
             out, (int)s->cols);
}

bp_status bp_powersgd_finish(bp_codec *c, float *grad, size_t n, bp_err *err) {
    powersgd *s;
    bp_status rc = as_powersgd(c, REPROJECTED, &s, err);
    if (rc == BP_OK) rc = check_length(s, n, err);
    if (rc != BP_OK) return rc;
    /* Two passes on a device: P Q^T, then M -= it. */
    if (on_device(s, product_flops(s, (size_t)s->rank), 0) && on_device(s, 0, 1)) {
        memset(grad, 0, n * sizeof *grad);
    } else {
        low_rank(s, s->p, s->q, grad);
        for (size_t i = 0; i < n; i++) s->m[i] -= grad[i];
    }
    s->at = IDLE;
    return BP_OK;
}

static size_t psgd_encoded_size(const bp_codec *c, size_t n) {
    const powersgd *s = (const powersgd *)c;
    return sizeof(float) * (is_2d(s) ? (s->rows + s->cols) * (size_t)s->rank : n);
}

static bp_status psgd_encode(bp_codec *c, const float *x, size_t n, void *out, bp_err *err) {
    powersgd *s = (powersgd *)c;
    if (!is_2d(s)) {
        bp_status rc = check_input(s, x, n, err);
        if (rc == BP_OK) memcpy(out, x, n * sizeof *x);
        return rc;
    }
    float *p, *q;
    size_t p_len, q_len;
    bp_status rc = bp_powersgd_project(c, x, n, &p, &p_len, err);
    if (rc == BP_OK) rc = bp_powersgd_reproject(c, &q, &q_len, err);
    if (rc != BP_OK) return rc;
    memcpy(out, p, p_len * sizeof *p);
    memcpy((float *)out + p_len, q, q_len * sizeof *q);
    s->at = IDLE;
    if (on_device(s, product_flops(s, (size_t)s->rank), 1)) return BP_OK;
    /* E = M - P Q^T without a rows x cols temporary. */
    bp_sgemm(false, true, (int)s->rows, (int)s->cols, s->rank, -1.0f, p, s->rank, q, s->rank, 1.0f,
             s->m, (int)s->cols);
    return BP_OK;
}

static bp_status psgd_decode(const bp_codec *c, const void *in, size_t n, float *x, bp_err *err) {
    const powersgd *s = (const powersgd *)c;
    bp_status rc = check_length(s, n, err);
    if (rc != BP_OK) return rc;
    if (!is_2d(s)) {
        memcpy(x, in, n * sizeof *x);
        return BP_OK;
    }
    if (on_device(s, product_flops(s, (size_t)s->rank), 0)) {
        memset(x, 0, n * sizeof *x);
        return BP_OK;
    }
    const float *p = in;
    low_rank(s, p, p + s->rows * (size_t)s->rank, x);
    return BP_OK;
}

static void psgd_destroy(bp_codec *c) {
    powersgd *s = (powersgd *)c;
    bp_free(s->m);
    bp_free(s->p);
    bp_free(s->q);
    free(s);
}

static const bp_codec_ops powersgd_ops = {
    .name = "powersgd",
    .encoded_size = psgd_encoded_size,
    .encode = psgd_encode,
    .decode = psgd_decode,
    .destroy = psgd_destroy,
};

bp_status bp_codec_powersgd_create(size_t rows, size_t cols, int rank, uint64_t seed,
                                   bp_codec **out, bp_err *err) {
    *out = NULL;
    if (rows == 0 || cols == 0 || rank < 1 || rows > INT32_MAX || cols > INT32_MAX)
        return bp_fail(err, BP_EUSAGE, "powersgd: bad shape %zu x %zu or rank %d", rows, cols,
                       rank);
    powersgd *s = calloc(1, sizeof *s);
    if (!s) return bp_fail(err, BP_ENOMEM, "powersgd: cannot allocate the codec");
    s->base.ops = &powersgd_ops;
    s->rows = rows;
    s->cols = cols;
    size_t r = (size_t)rank;
    r = r < rows ? r : rows;
    s->rank = (int)(r < cols ? r : cols);
    bp_status rc = BP_OK;
    if (is_2d(s)) {
        rc = bp_alloc_checked((void **)&s->m, rows * cols * sizeof(float), "powersgd error", err);
        if (rc == BP_OK)
            rc =
                bp_alloc_checked((void **)&s->p, rows * s->rank * sizeof(float), "powersgd P", err);
        if (rc == BP_OK)
            rc =
                bp_alloc_checked((void **)&s->q, cols * s->rank * sizeof(float), "powersgd Q", err);
    }
    if (rc != BP_OK) {
        psgd_destroy(&s->base);
        return rc;
    }
    bp_rng rng;
    bp_rng_seed(&rng, seed, 0);
    for (size_t i = 0; s->q && i < cols * (size_t)s->rank; i++)
        s->q[i] = (float)bp_rng_normal(&rng);
    *out = &s->base;
    return BP_OK;
}

bool bp_powersgd_compresses(const bp_codec *codec) {
    return codec->ops == &powersgd_ops && is_2d((const powersgd *)codec);
}

int bp_powersgd_rank(const bp_codec *codec) {
    return codec->ops == &powersgd_ops ? ((const powersgd *)codec)->rank : 0;
}

const float *bp_powersgd_error(const bp_codec *codec) {
    return codec->ops == &powersgd_ops ? ((const powersgd *)codec)->m : NULL;
}

bool bp_powersgd_state(bp_codec *codec, float **error, size_t *error_n, float **q, size_t *q_n) {
    if (codec->ops != &powersgd_ops || !is_2d((powersgd *)codec)) return false;
    powersgd *s = (powersgd *)codec;
    *error = s->m;
    *error_n = s->rows * s->cols;
    *q = s->q;
    *q_n = s->cols * (size_t)s->rank;
    return true;
}

void bp_powersgd_clear_error(bp_codec *codec) {
    if (codec->ops != &powersgd_ops) return;
    powersgd *s = (powersgd *)codec;
    if (s->m && s->at == IDLE) memset(s->m, 0, s->rows * s->cols * sizeof(float));
}
