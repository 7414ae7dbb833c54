/* What the parts of the tuner share (plan/tune_search.h describes them). */
#ifndef BP_PLAN_TUNE_IMPL_H
#define BP_PLAN_TUNE_IMPL_H

#include "plan/tune_search.h"

typedef bp_tune_result tuner;

/* Micro-batch counts beyond this only add per-operation overhead. */
enum { MAX_MICRO = 32, TIMING_RUNS = 5, STAGE_RUNS = 3 };

/* One micro-batch size: the stages cut from its blocks' times as the trainer would
 * cut them (or the given partition). */
struct bp_tune_size {
    int micro_B;
    int *first; /* [S+1] */
};

/* profile.c: cut the stages of every size, time every setup and the machine. */
bp_status bp_tune_profile(tuner *t, bp_err *err);
/* profile.c: how long messages take: the emulated network, or shared memory. */
void bp_tune_set_link(tuner *t);
/* search.c: qsort's order of candidates, most samples per second first. */
int bp_tune_by_rate(const void *a, const void *b);
/* predict.c: candidate k's step under the machine's load and on an idle one. */
bp_status bp_tune_predict(const tuner *t, bp_tune_candidate *k);

#endif
