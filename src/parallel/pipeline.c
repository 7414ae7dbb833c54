#include "parallel/pipeline.h"

#include "parallel/partition.h"
#include "parallel/schedule.h"

#define S bp_pipeline_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "pp", BP_OPT_INT, stages, 1, 1 << 16, "S", "pipeline stages"),
    BP_OPT_STR(S, "partition", partition, "N,N,..",
               "blocks per pipeline stage (gpt has layers + 2 blocks: embedding, layers, head)",
               "balanced by measured block time"),
    BP_OPT_NUM(S, "micro-batches", BP_OPT_INT, micro_batches, 1, 1 << 20, "M",
               "micro-batches each replica's batch is split into (the pipeline's unit of work)"),
    BP_OPT_STR(S, "schedule", schedule, "NAME", "pipeline schedule: gpipe, 1f1b or afp:K", "1f1b"),
};
#undef S
static const bp_pipeline_settings defaults = {.stages = 1, .micro_batches = 1, .schedule = "1f1b"};
const bp_option_group bp_pipeline_options = BP_OPTION_GROUP(options, defaults);

bp_status bp_pipeline_check(const bp_pipeline_settings *s, int blocks, bp_err *err) {
    bp_schedule sched;
    bp_status rc = bp_schedule_parse(s->schedule, &sched, err);
    if (rc) return rc;
    if (s->stages > blocks)
        return bp_fail(err, BP_EUSAGE, "option --pp: %d stages for a model of %d blocks",
                       s->stages, blocks);
    if (!s->partition[0]) return BP_OK;
    int first[s->stages + 1];
    if ((rc = bp_partition_parse(s->partition, blocks, s->stages, first, err)))
        return bp_err_context(err, "option --partition");
    return BP_OK;
}
