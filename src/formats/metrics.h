/* The JSONL metrics log: one JSON object per line, flushed line by line so a
 * crashed run leaves only complete records. Records:
 *   {"type":"config","model":..,"params":..,"world":..,"dp":..,"batch":..,"grad_accum":..,
 *    "dp_algo":"<algorithm and its settings>","net":..}  (and the grid, pipeline, schedule)
 *   {"type":"step","step":k,"loss":..,"lr":..,"grad_norm":..,"step_ms":..,"compute_ms":..,
 *    "comm_exposed_ms":..,"bytes_sent":..,"items_per_s":..,
 *    "axis_bytes":{"dp":..,"pp":..,"tp":..,"embed":..},"axis_exposed_ms":{...same keys...}}
 *   {"type":"eval","step":k,"val_loss":..[,"val_acc":..]}
 *   {"type":"summary","steps":..,"median_step_ms":..,"peak_rss_bytes":..,"param_bytes":..,
 *    "grad_bytes":..,"optim_bytes":..,"act_bytes":..}
 * (the median is over the last 2^20 steps of the run; null when the run took none).
 *   {"type":"stages","busy_s":[per stage],"idle_s":[..],"peak_stash":[..],
 *    "act_bytes_per_micro":[..],"bwd_sends":[..],"bwd_compressed":[..],"bwd_rel_err":[..]}
 * (bwd_rel_err: mean over the compressed sends of |M - P Q^T| / |M|, 0 without).
 * k counts completed optimizer steps (1 after the first step). The loss is the
 * mean over the replicas; bytes are those sent by all ranks together, split by the
 * axis of the grid they belong to (embed: the tied embedding's sync between first
 * and last pipeline stage); times are rank 0's: compute_ms is the step time not
 * spent waiting for communication, comm_exposed_ms the time spent waiting, also
 * split by axis (pp's exposed time is the pipeline bubble). */
#ifndef BP_FORMATS_METRICS_H
#define BP_FORMATS_METRICS_H

#include <stdint.h>
#include <stdio.h>

#include "bagpipe/status.h"
#include "core/file.h"

/* What a metrics log begins with, for bp_check_output. */
extern const bp_output_kind bp_metrics_file_kind;

typedef struct bp_metrics {
    FILE *f;          /* NULL: logging off */
    const char *path; /* as given to bp_metrics_open */
    int error;        /* errno of the first record that did not reach the file */
} bp_metrics;

enum { BP_AXIS_DP, BP_AXIS_PP, BP_AXIS_TP, BP_AXIS_EMBED, BP_AXES };

typedef struct bp_step_record {
    int64_t step;
    double loss, lr, grad_norm, step_ms, compute_ms, comm_exposed_ms, bytes_sent, items_per_s;
    double axis_bytes[BP_AXES], axis_exposed_ms[BP_AXES];
} bp_step_record;

typedef struct bp_memory_record {
    int64_t steps;
    double median_step_ms;
    uint64_t peak_rss_bytes, param_bytes, grad_bytes, optim_bytes, act_bytes;
    /* Emulated: the device's modeled work per step, and the most device memory held
     * (NAN and 0 on a device that computes). */
    double device_work_ms;
    uint64_t device_peak_bytes;
} bp_memory_record;

typedef struct bp_config_record {
    const char *model;
    size_t params;
    int world, dp, pp;
    const char *partition;
    int pipelines, micro_batches;
    const char *schedule;
    int batch, grad_accum;
    const char *dp_algo, *net;
    /* An emulated device: its name and dilation (NULL: a device that computes). */
    const char *device;
    double dilation;
} bp_config_record;

/* The per-stage figures of a run, in the order of the stages record's keys. */
enum { BP_STAGE_BUSY, BP_STAGE_IDLE, BP_STAGE_PEAK_STASH, BP_STAGE_ACT_BYTES, BP_STAGE_BWD_SENDS,
       BP_STAGE_BWD_COMPRESSED, BP_STAGE_BWD_REL_ERR, BP_STAGE_KEYS };

/* Open path for appending (append) or truncating; an empty path turns logging off. */
bp_status bp_metrics_open(bp_metrics *m, const char *path, int append, bp_err *err);
void bp_metrics_close(bp_metrics *m);
/* BP_EIO naming the log when a record written so far did not reach the file (a
 * full disk): records are flushed one by one, so this sees every failure. */
bp_status bp_metrics_check(bp_metrics *m, bp_err *err);
void bp_metrics_step(bp_metrics *m, const bp_step_record *r);
/* accuracy is left out when NaN. */
void bp_metrics_eval(bp_metrics *m, int64_t step, double loss, double accuracy);
void bp_metrics_summary(bp_metrics *m, const bp_memory_record *r);
void bp_metrics_config(bp_metrics *m, const bp_config_record *r);
/* --bucket-mb auto's measurement: after step `step`, n sizes (MB) with their
 * median step times (ms; negative: not measured) and the size chosen. */
void bp_metrics_bucket_tune(bp_metrics *m, int64_t step, int n, const double *size_mb,
                            const float *step_ms, double chosen_mb);
/* v[k * S + s]: figure k (BP_STAGE_*) of stage s. */
void bp_metrics_stages(bp_metrics *m, int S, const float *v);

#endif
