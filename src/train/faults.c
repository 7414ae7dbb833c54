#include "train/faults.h"

#define S bp_fault_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "fault-kill-rank", BP_OPT_INT, kill_rank, -1, 1 << 20, "R",
               "testing: rank R kills itself (SIGKILL) at --fault-at-step"),
    BP_OPT_NUM(S, "fault-hang-rank", BP_OPT_INT, hang_rank, -1, 1 << 20, "R",
               "testing: rank R stops communicating at --fault-at-step"),
    BP_OPT_NUM(S, "fault-nan-rank", BP_OPT_INT, nan_rank, -1, 1 << 20, "R",
               "testing: rank R's loss and gradients become NaN at --fault-at-step"),
    BP_OPT_NUM(S, "fault-nan-weights-rank", BP_OPT_INT, nan_weights_rank, -1, 1 << 20, "R",
               "testing: a weight of rank R becomes NaN before --fault-at-step (a diverged "
               "step)"),
    BP_OPT_NUM(S, "fault-at-step", BP_OPT_INT64, at_step, -1, 1e12, "S",
               "testing: the step (1-based) at which a --fault-* happens"),
};
#undef S
static const bp_fault_settings defaults = {
    .kill_rank = -1, .hang_rank = -1, .nan_rank = -1, .nan_weights_rank = -1, .at_step = -1};
const bp_option_group bp_fault_options = BP_OPTION_GROUP(options, defaults);
