/* The wake delay's measurement (plan/sim_wake.c) waits as the run's ranks do:
 * where they test every --comm-poll-us and sleep in between, the waiting thread of
 * the measurement sleeps too, so a hand-over waits for its next test. With a model
 * whose passes take far less than the interval, every hand-over then costs most of
 * an interval: a lower bound that sleeping guarantees on any machine (a waiter that
 * spins or yields would see the token within microseconds on an idle one). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "nn/model.h"
#include "plan/sim_wake.h"

static void test_a_polling_waiter_waits_for_its_next_test(void **state) {
    (void)state;
    bp_model_config mc = {.kind = BP_MODEL_GPT, .vocab = 16, .n_layer = 1, .n_embd = 8,
                          .n_head = 2, .seq_len = 4};
    const double poll_s = 0.05;
    double wake = 0;
    bp_err err = {0};
    assert_int_equal(bp_measure_wake(&mc, 1, 1, 4, poll_s, 10, &wake, &err), BP_OK);
    assert_true(wake >= 0.4 * poll_s);
}

/* A sleep never ends before its deadline: the measured sleep of a wait is at least
 * the interval asked for. */
static void test_a_poll_sleeps_at_least_its_interval(void **state) {
    (void)state;
    assert_true(bp_measure_poll_sleep(2e-3) >= 2e-3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_polling_waiter_waits_for_its_next_test),
        cmocka_unit_test(test_a_poll_sleeps_at_least_its_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
