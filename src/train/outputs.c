/* The files a run writes at paths the user names (--metrics, --trace): checked by
 * rank 0 before training, so that an option pointed by mistake at a device, a
 * directory, the run's own files or another file fails at once with one line
 * instead of replacing or truncating it at the end. */
#include <string.h>
#include <sys/stat.h>

#include "train/outputs.h"

#include "formats/metrics.h"
#include "formats/trace_file.h"

static bool holds_data(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0;
}

/* A new run truncates a metrics log that is not its --out's own (whose run the
 * claim of --out already protects) only when told to: it is another run's. */
static bp_status check_metrics(const bp_train_config *c, bool resuming, const char *latest,
                               bp_err *err) {
    char own[BP_PATH_MAX];
    bp_status rc = bp_check_output(c->metrics, &bp_metrics_file_kind, err);
    if (rc) return bp_err_context(err, "option --metrics");
    if (bp_same_path(c->metrics, latest))
        return bp_fail(err, BP_EUSAGE, "option --metrics: %s is the run's `latest` pointer",
                       c->metrics);
    if ((rc = bp_path_join(own, sizeof own, c->out, "metrics.jsonl", err))) return rc;
    if (!resuming && !c->overwrite && holds_data(c->metrics) && !bp_same_path(c->metrics, own))
        return bp_fail(err, BP_EUSAGE,
                       "option --metrics: %s holds another run's metrics log, which a new run "
                       "would truncate; give a new name, or --overwrite to replace it",
                       c->metrics);
    return BP_OK;
}

static bp_status check_trace(const bp_train_config *c, const char *latest, bp_err *err) {
    if (!c->trace[0]) return BP_OK;
    bp_status rc = bp_check_output(c->trace, &bp_trace_file_kind, err);
    if (rc) return bp_err_context(err, "option --trace");
    bool on_latest = bp_same_path(c->trace, latest);
    if (on_latest || bp_same_path(c->trace, c->metrics))
        return bp_fail(err, BP_EUSAGE, "option --trace: %s is the run's %s", c->trace,
                       on_latest ? "`latest` pointer" : "metrics log (--metrics)");
    return BP_OK;
}

bp_status bp_train_check_outputs(const bp_train_config *c, bool resuming, bp_err *err) {
    char latest[BP_PATH_MAX];
    bp_status rc = bp_path_join(latest, sizeof latest, c->out, "latest", err);
    if (rc == BP_OK) rc = check_metrics(c, resuming, latest, err);
    if (rc == BP_OK) rc = check_trace(c, latest, err);
    return rc;
}
