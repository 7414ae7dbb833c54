/* The pipeline's settings (--pp, --partition, --micro-batches, --schedule), set by
 * the options that pipeline.c declares. The schedules are parallel/schedule.h, the
 * partition parallel/partition.h, the stage runtime parallel/pipe.h. */
#ifndef BP_PARALLEL_PIPELINE_H
#define BP_PARALLEL_PIPELINE_H

#include "core/options.h"

typedef struct bp_pipeline_settings {
    int stages;          /* pipeline stages */
    char partition[256]; /* blocks per stage, "2,3,3"; "" balances measured time */
    int micro_batches;   /* per optimizer step and per gradient accumulation */
    char schedule[32];   /* gpipe | 1f1b | afp:K */
} bp_pipeline_settings;

extern const bp_option_group bp_pipeline_options;

/* Refuse a schedule that does not parse, more stages than the model's `blocks`, and
 * a partition that does not fit them; messages name the option. */
bp_status bp_pipeline_check(const bp_pipeline_settings *s, int blocks, bp_err *err);

#endif
