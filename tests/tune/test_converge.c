/* The convergence side of tune (plan/tune_converge.c).
 *
 *  - Samples to a target on a known curve (2 + 3 exp(-s / 500) evaluated every 100
 *    samples) against a plain computation: the first sample, on a fine grid, where
 *    the line through the evaluations is at or below the target.
 *  - Edges: a curve that starts below the target, one that never reaches it, one
 *    that dips below and comes back (the first crossing counts), a non-finite point.
 *  - Ranking: each candidate's time to the target is the samples of its N's trial
 *    over its samples per second; candidates come least time first, those that
 *    never reach it after them, the diverged last; equal times by samples/s. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "plan/tune_search.h"

enum { POINTS = 10 };

/* The line through the evaluations at s (within their range). */
static double line_at(const double *x, const double *y, int n, double s) {
    for (int i = 1; i < n; i++)
        if (s <= x[i]) return y[i - 1] + (y[i] - y[i - 1]) * (s - x[i - 1]) / (x[i] - x[i - 1]);
    return y[n - 1];
}

/* The plain computation: walk the line in steps of 0.01 samples. */
static double first_at_or_below(const double *x, const double *y, int n, double target) {
    for (long k = 0; x[0] + 0.01 * (double)k <= x[n - 1] + 1e-9; k++)
        if (line_at(x, y, n, x[0] + 0.01 * (double)k) <= target) return x[0] + 0.01 * (double)k;
    return INFINITY;
}

static void test_known_curve(void **state) {
    (void)state;
    double x[POINTS], y[POINTS];
    for (int i = 0; i < POINTS; i++) {
        x[i] = 100.0 * (i + 1);
        y[i] = 2 + 3 * exp(-x[i] / 500);
    }
    for (double target = y[POINTS - 1]; target < y[0]; target += 0.037) {
        double got = bp_tune_samples_to(x, y, POINTS, target);
        double want = first_at_or_below(x, y, POINTS, target);
        if (fabs(got - want) > 0.011) {
            print_error("target %.4f: %.4f samples, the plain walk %.4f\n", target, got, want);
            fail();
        }
    }
    /* At an evaluation's loss exactly: that evaluation's samples. */
    assert_true(fabs(bp_tune_samples_to(x, y, POINTS, y[3]) - x[3]) < 1e-9);
    /* Halfway between two evaluations' losses: halfway between their samples. */
    assert_true(fabs(bp_tune_samples_to(x, y, POINTS, (y[4] + y[5]) / 2) - 550) < 1e-9);
}

static void test_edges(void **state) {
    (void)state;
    double x[4] = {10, 20, 30, 40};
    double below[4] = {1.0, 0.9, 0.8, 0.7};
    assert_true(bp_tune_samples_to(x, below, 4, 1.5) == 10);
    assert_true(isinf(bp_tune_samples_to(x, below, 4, 0.5)));
    double dip[4] = {3.0, 1.0, 3.0, 0.5};
    assert_true(fabs(bp_tune_samples_to(x, dip, 4, 2.0) - 15) < 1e-9);
    double nan_first[4] = {3.0, NAN, 1.0, 1.0};
    assert_true(fabs(bp_tune_samples_to(x, nan_first, 4, 2.0) - 30) < 1e-9);
    assert_true(isinf(bp_tune_samples_to(x, below, 0, 5.0)));
}

/* A candidate of N pipelines (0: plain) predicted at `rate` samples per second. */
static bp_tune_candidate cand(int pipelines, double rate) {
    int N = pipelines ? pipelines : 1, batches = pipelines ? pipelines : 1;
    double step_s = 8.0 * batches / rate;
    return (bp_tune_candidate){.N = N, .M = 1, .avgpipe = pipelines > 0, .batches = batches,
                               .r = {.step_s = step_s}, .samples_per_s = rate};
}

static void test_rank_by_target(void **state) {
    (void)state;
    /* Trials: plain 800 samples, N = 2 1200, N = 4 never, N = 3 diverged. */
    bp_tune_curve curves[4] = {{.pipelines = 0, .to_target = 800},
                               {.pipelines = 2, .to_target = 1200},
                               {.pipelines = 4, .to_target = INFINITY},
                               {.pipelines = 3, .to_target = INFINITY, .diverged = true}};
    bp_tune_trial tr = {.steps = 100, .target = 3.0, .curve = curves, .n = 4};
    bp_tune_candidate c[] = {cand(4, 9000), cand(3, 8000), cand(2, 2000), cand(0, 1000),
                             cand(2, 1000), cand(0, 1600), cand(0, 400), cand(4, 100)};
    int n = (int)(sizeof c / sizeof c[0]);
    bp_tune_result r = {.cand = c, .n_cand = n};
    bp_tune_rank_by_target(&r, &tr);
    /* Times: plain 800 / 1600 = 0.5, N = 2 1200 / 2000 = 0.6, plain 800 / 1000 = 0.8,
     * N = 2 1200 / 1000 = 1.2, plain 800 / 400 = 2; then never (9000, 100), diverged. */
    const int want_N[] = {1, 2, 1, 2, 1, 4, 4, 3};
    const double want_rate[] = {1600, 2000, 1000, 1000, 400, 9000, 100, 8000};
    for (int i = 0; i < n; i++) {
        assert_int_equal(c[i].N, want_N[i]);
        assert_true(c[i].samples_per_s == want_rate[i]);
        const bp_tune_curve *v = bp_tune_trial_curve(&tr, &c[i]);
        assert_non_null(v);
        assert_true(c[i].to_target == v->to_target);
        assert_true(c[i].to_target_s == v->to_target / c[i].samples_per_s);
        assert_int_equal(c[i].diverged, v->diverged);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_known_curve),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_rank_by_target),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
