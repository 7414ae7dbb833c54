/* C_FP_A on 1 to 4 ranks: the background average reaches the exact average of a
 * static input, keeps local progress made meanwhile (the sum over ranks is
 * preserved), and stops cleanly on every rank when one rank stops early. */
#include "mpi_test.h"

#include "core/timer.h"

/* Wait (up to 10 s) until cond(a) holds; false on timeout. */
static bool wait_for(bp_async_avg *a, bool (*cond)(bp_async_avg *)) {
    double until = bp_now() + 10;
    while (!cond(a) && bp_now() < until) bp_sleep_until(bp_now() + 0.001);
    return cond(a);
}

static bool two_rounds(bp_async_avg *a) { return bp_async_avg_rounds(a) >= 2; }
static bool stopped(bp_async_avg *a) { return !bp_async_avg_running(a); }

static void assert_same_rounds(bp_async_avg *a) {
    uint64_t r = bp_async_avg_rounds(a), lo, hi;
    MPI_Allreduce(&r, &lo, 1, MPI_UINT64_T, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&r, &hi, 1, MPI_UINT64_T, MPI_MAX, MPI_COMM_WORLD);
    assert_true(lo == hi && lo >= 1);
}

static void static_input(const config *cfg) {
    const size_t n = 4099;
    bp_comm *g = group_for(cfg);
    float *x = floats(n);
    for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 30);
    bp_async_avg *a = NULL;
    assert_int_equal(bp_async_avg_start(g, x, n, 2, &a), BP_OK);
    assert_true(wait_for(a, two_rounds));
    bp_async_avg_lock(a);
    for (size_t i = 0; i < n; i++) {
        double want = 0;
        for (int r = 0; r < nranks; r++) want += value_of(r, i, 30);
        assert_true(fabs(x[i] - want / nranks) <= 1e-6);
    }
    bp_async_avg_unlock(a);
    assert_int_equal(bp_async_avg_stop(a), BP_OK);
    assert_false(bp_async_avg_running(a));
    assert_same_rounds(a);
    bp_stats st;
    assert_int_equal(bp_comm_stats(g, &st, false), BP_OK);
    assert_int_equal(st.op[BP_OP_ASYNC_AVG].calls, bp_async_avg_rounds(a));
    bp_async_avg_destroy(a);
    free(x);
    group_done(g);
}

static void test_static_input_reaches_the_average(void **state) {
    (void)state;
    static_input(&CONFIGS[0]);
    static_input(&CONFIGS[3]); /* hierarchical */
}

/* Every rank keeps adding to its x while the thread averages; rank 0 stops after
 * a few rounds and the others run on until their threads end by themselves. */
static void test_progress_kept_and_early_stop(void **state) {
    (void)state;
    const size_t n = 1000;
    bp_comm *g = group_for(&CONFIGS[0]);
    float *x = floats(n);
    double added = 0, start = 0;
    for (size_t i = 0; i < n; i++) x[i] = value_of(me, i, 31), start += x[i];
    bp_async_avg *a = NULL;
    assert_int_equal(bp_async_avg_start(g, x, n, 3, &a), BP_OK);
    bool alone = false;
    while (!alone) {
        float step = 0.001f * (float)(me + 1);
        bp_async_avg_lock(a);
        for (size_t i = 0; i < n; i++) x[i] += step;
        bp_async_avg_unlock(a);
        added += (double)step * n;
        bp_sleep_until(bp_now() + 0.0005);
        if (me == 0 && bp_async_avg_rounds(a) >= 3) {
            assert_int_equal(bp_async_avg_stop(a), BP_OK);
            alone = true;
        }
        if (me != 0) alone = !bp_async_avg_running(a);
    }
    assert_true(wait_for(a, stopped));
    assert_int_equal(bp_async_avg_stop(a), BP_OK);
    assert_same_rounds(a);
    /* Averaging moves mass between ranks but never creates or loses it. */
    double sum = 0, mine[2] = {start + added, 0}, all[2];
    for (size_t i = 0; i < n; i++) sum += x[i];
    mine[1] = sum;
    MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    assert_true(fabs(all[0] - all[1]) <= 1e-5 * n);
    bp_async_avg_destroy(a);
    free(x);
    group_done(g);
}

static void test_bad_interval(void **state) {
    (void)state;
    float x[1] = {0};
    bp_async_avg *a = (bp_async_avg *)x;
    assert_int_equal(bp_async_avg_start(world, x, 1, 0, &a), BP_EUSAGE);
    assert_null(a);
    assert_non_null(strstr(bp_comm_errmsg(world), "interval"));
}

int main(int argc, char **argv) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_static_input_reaches_the_average),
        cmocka_unit_test(test_progress_kept_and_early_stop),
        cmocka_unit_test(test_bad_interval),
    };
    return run_mpi_tests(argc, argv, "comm async", tests, sizeof tests / sizeof tests[0]);
}
