/* `bagpipe tune`'s output: the profile, the candidates fastest first and the
 * train command of the fastest that fits --mem-cap. */
#ifndef BP_PLAN_TUNE_REPORT_H
#define BP_PLAN_TUNE_REPORT_H

#include <stdio.h>

#include "plan/tune.h"

/* Search and print to `out`. argv[0..argc) are the options as given (to repeat in
 * the suggested command) and prog the bagpipe binary. BP_EUSAGE when no candidate
 * fits --mem-cap or none is valid. */
bp_status bp_tune_report(const bp_tune_config *c, const char *prog, int argc, char **argv, FILE *out,
                         bp_err *err);

#endif
