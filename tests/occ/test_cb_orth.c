/* Compressed backpropagation's sender (bp_cb_encode) against Optimus-CC's p2p
 * compressor's rule in double, on a 32 x 16 gradient at rank 3 with lazy error
 * propagation, over several sends: Q orthonormalized before every use (its first
 * random draw, then the previous send's Q = M^T P); M = G + E; P = M Q,
 * orthonormalized; Q = M^T P; E = M - P Q^T; the wire is [P][Q].
 *
 * In exact arithmetic orthonormalizing Q first leaves P (and so everything else)
 * as it is, so gradients of ordinary size cannot tell; tiny ones can: a reused Q
 * carries |M|, P = M Q then scales as |M|^2 and, for entries of 1e-12, falls
 * below the zero column threshold of Gram-Schmidt, and a sender that skipped the
 * step would send zeros. Both scales are checked. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/rng.h"
#include "core/state.h"
#include "parallel/occ.h"
#include "gram_schmidt_ref.h"

enum { ROWS = 32, COLS = 16, RANK = 3, SENDS = 4, N = ROWS * COLS };

/* One send of the reference: updates q and e, fills p. */
static void reference_send(const float *g, double *q, double *e, double *p) {
    orthonormalize_ref(q, COLS, RANK);
    for (int i = 0; i < N; i++) e[i] += g[i]; /* e holds M now */
    for (int i = 0; i < ROWS; i++)
        for (int j = 0; j < RANK; j++) {
            double s = 0;
            for (int k = 0; k < COLS; k++) s += e[i * COLS + k] * q[k * RANK + j];
            p[i * RANK + j] = s;
        }
    orthonormalize_ref(p, ROWS, RANK);
    for (int k = 0; k < COLS; k++)
        for (int j = 0; j < RANK; j++) {
            double s = 0;
            for (int i = 0; i < ROWS; i++) s += e[i * COLS + k] * p[i * RANK + j];
            q[k * RANK + j] = s;
        }
    for (int i = 0; i < ROWS; i++)
        for (int k = 0; k < COLS; k++)
            for (int j = 0; j < RANK; j++) e[i * COLS + k] -= p[i * RANK + j] * q[k * RANK + j];
}

/* got within 1e-4 of want's largest magnitude, which must not be zero. */
static void expect_close(const float *got, const double *want, size_t n) {
    double scale = 0, worst = 0;
    for (size_t i = 0; i < n; i++) scale = fmax(scale, fabs(want[i]));
    for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs((double)got[i] - want[i]));
    assert_true(scale > 0);
    if (!(worst <= 1e-4 * scale)) fail_msg("off by %.3g (largest value %.3g)", worst, scale);
}

static void sends_at_scale(double scale) {
    bp_occ_config c = {.cb_rank = RANK, .lep = true, .seed = 99};
    bp_cb *cb = NULL;
    assert_int_equal(bp_cb_create(&c, 2, 1, 1, ROWS, N, N, &cb, NULL), BP_OK);
    bp_state_list l = {0};
    assert_int_equal(bp_cb_state(cb, &l, NULL), BP_OK); /* cb.0.error, cb.0.q */
    assert_int_equal(l.n, 2);
    double q[COLS * RANK], e[N] = {0}, p[ROWS * RANK];
    for (int i = 0; i < COLS * RANK; i++) q[i] = l.bufs[1].data[i]; /* the random draw */
    bp_state_list_free(&l);
    size_t wire_n = bp_cb_send_floats(cb);
    assert_int_equal(wire_n, (ROWS + COLS) * RANK);
    float g[N], wire[(ROWS + COLS) * RANK];
    bp_rng rng;
    bp_rng_seed(&rng, 7, 0);
    for (int t = 0; t < SENDS; t++) {
        for (int i = 0; i < N; i++) g[i] = (float)(scale * bp_rng_normal(&rng));
        assert_int_equal(bp_cb_encode(cb, 0, g, wire, NULL, NULL), BP_OK);
        reference_send(g, q, e, p);
        expect_close(wire, p, ROWS * RANK);
        expect_close(wire + ROWS * RANK, q, COLS * RANK);
    }
    bp_cb_destroy(cb);
}

static void test_ordinary_gradients(void **state) {
    (void)state;
    sends_at_scale(1.0);
}

static void test_tiny_gradients(void **state) {
    (void)state;
    sends_at_scale(1e-12);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ordinary_gradients),
        cmocka_unit_test(test_tiny_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
