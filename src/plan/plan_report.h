/* `bagpipe plan`'s output: what it measured, the top configurations with the train
 * command of each, and the whole ranking as JSON (plan/plan.h plans). */
#ifndef BP_PLAN_PLAN_REPORT_H
#define BP_PLAN_PLAN_REPORT_H

#include <stdio.h>

#include "plan/plan.h"

/* Print r's top c->top to out and write the ranking to c->json. prog: the bagpipe
 * binary; argv[0..argc): the options as given. */
bp_status bp_plan_report(const bp_plan_config *c, const bp_plan_result *r, const char *prog,
                         int argc, char **argv, FILE *out, bp_err *err);

#endif
