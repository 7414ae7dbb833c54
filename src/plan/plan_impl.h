/* What the parts of `bagpipe plan` share (plan/plan.h describes them). */
#ifndef BP_PLAN_PLAN_IMPL_H
#define BP_PLAN_PLAN_IMPL_H

#include "plan/sim_machine.h"
#include "plan/plan.h"
#include "plan/simulate.h"

/* plan_candidates.c: every configuration of r's world into r->cand. */
bp_status bp_plan_enumerate(const bp_plan_config *c, bp_plan_result *r, bp_err *err);
/* plan_candidates.c: each rank checks and predicts its share of the candidates on
 * machine m; then every rank holds all. */
bp_status bp_plan_evaluate(const bp_plan_config *c, bp_comm *world, const bp_sim_machine *m,
                           int argc, char **argv, bp_plan_result *r, bp_err *err);
/* plan_candidates.c: weigh by statistical efficiency (the table's factor where
 * --trials did not set one) and sort. */
void bp_plan_rank(const bp_plan_config *c, bp_plan_result *r);
/* plan_candidates.c: candidate k's configuration as train takes it on `world` ranks:
 * the given options, then k's. */
bp_status bp_plan_configure(int argc, char **argv, const bp_plan_candidate *k, int world,
                            bp_train_config *t, bp_err *err);
/* plan_trials.c: --trials: the leading kinds' factors measured (collective; rank 0
 * holds the result). */
bp_status bp_plan_trials(const bp_plan_config *c, bp_comm *world, int argc, char **argv,
                         bp_plan_result *r, bp_err *err);
/* plan_factors.c: --factors, the factors an earlier plan's trials measured, read once
 * from its ranking JSON (every rank reads the file; BP_EUSAGE naming it when it is not
 * such a ranking of `model`); apply sets them on the candidates of the same kinds. */
typedef struct bp_plan_factors bp_plan_factors;
bp_status bp_plan_factors_load(const char *path, const char *model, bp_plan_factors **out, bp_err *err);
void bp_plan_factors_apply(const bp_plan_factors *f, bp_plan_result *r);
void bp_plan_factors_free(bp_plan_factors *f);
/* plan.c: calls f(word, ctx) for each given word that train takes (not plan's own). */
void bp_plan_given_words(int argc, char **argv, void (*f)(const char *, void *), void *ctx);

#endif
