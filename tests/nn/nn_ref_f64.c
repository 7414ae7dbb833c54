/* Prints "loss gradient-norm" of every fx_case in double precision, one line each,
 * for test_nn_float (the float and double builds of nn/ cannot share one program). */
#include <stdio.h>

#include "nn_fixture.h"

int main(void) {
    double loss, gnorm;
    for (int i = 0; fx_run_case(i, &loss, &gnorm) == BP_OK; i++)
        printf("%.17g %.17g\n", loss, gnorm);
    return 0;
}
