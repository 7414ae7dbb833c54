/* The float build of nn/ (the one training uses) against the double build that the
 * gradient checks validated: same configurations, initialization and batch give the
 * same loss to ~1e-5 and the same gradient norm to ~1e-4. The double results come
 * from the helper program nn_ref_f64. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "nn_fixture.h"

_Static_assert(sizeof(bp_real) == sizeof(float), "this test checks the float build");

static void test_float_matches_double(void **state) {
    (void)state;
    FILE *ref = popen(NN_REF_F64, "r");
    assert_non_null(ref);
    int cases = 0;
    double ld, gd;
    while (fscanf(ref, "%lf %lf", &ld, &gd) == 2) {
        double lf = NAN, gf = NAN;
        assert_int_equal(fx_run_case(cases, &lf, &gf), BP_OK);
        printf("case %d: loss float %.9f double %.9f, |grad| float %.9g double %.9g\n", cases, lf,
               ld, gf, gd);
        assert_true(fabs(lf - ld) <= 1e-5 * fabs(ld));
        assert_true(fabs(gf - gd) <= 1e-4 * gd);
        cases++;
    }
    assert_int_equal(pclose(ref), 0);
    assert_true(cases >= 4);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_float_matches_double)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
