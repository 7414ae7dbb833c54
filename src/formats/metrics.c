#include "formats/metrics.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <string.h>
#include <unistd.h>

const bp_output_kind bp_metrics_file_kind = {"metrics log", "{\"type\":", true};

/* Each record reaches the file at once; the first failure's errno is kept. */
static void flush(bp_metrics *m) {
    if (fflush(m->f) != 0 && !m->error) m->error = errno ? errno : EIO;
}

bp_status bp_metrics_open(bp_metrics *m, const char *path, int append, bp_err *err) {
    m->f = NULL;
    m->path = path;
    m->error = 0;
    if (!path[0]) return BP_OK;
    /* Non-blocking, so that a FIFO no process reads fails at once instead of
     * blocking in open() for good; writes block again once it is open. */
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC | O_NONBLOCK | (append ? O_APPEND : O_TRUNC),
                  0666);
    if (fd < 0 && errno == ENXIO)
        return bp_fail(err, BP_EIO, "cannot open metrics log %s: a FIFO that no process reads "
                       "(start its reader first)", path);
    if (fd >= 0 && fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) == 0)
        m->f = fdopen(fd, append ? "a" : "w");
    if (!m->f) {
        int e = errno;
        if (fd >= 0) close(fd);
        return bp_fail(err, BP_EIO, "cannot open metrics log %s: %s", path, strerror(e));
    }
    return BP_OK;
}

bp_status bp_metrics_check(bp_metrics *m, bp_err *err) {
    if (!m->f) return BP_OK;
    flush(m);
    if (!m->error && ferror(m->f)) m->error = EIO;
    if (!m->error) return BP_OK;
    return bp_fail(err, BP_EIO, "cannot write the metrics log %s: %s", m->path, strerror(m->error));
}

void bp_metrics_close(bp_metrics *m) {
    if (m->f) fclose(m->f);
    m->f = NULL;
}

/* JSON has no NaN or Infinity: write null for them. */
static void num(FILE *f, const char *key, double v) {
    if (isfinite(v))
        fprintf(f, ",\"%s\":%.9g", key, v);
    else
        fprintf(f, ",\"%s\":null", key);
}

void bp_metrics_step(bp_metrics *m, const bp_step_record *r) {
    if (!m->f) return;
    fprintf(m->f, "{\"type\":\"step\",\"step\":%" PRId64, r->step);
    num(m->f, "loss", r->loss);
    num(m->f, "lr", r->lr);
    num(m->f, "grad_norm", r->grad_norm);
    num(m->f, "step_ms", r->step_ms);
    num(m->f, "compute_ms", r->compute_ms);
    num(m->f, "comm_exposed_ms", r->comm_exposed_ms);
    num(m->f, "bytes_sent", r->bytes_sent);
    num(m->f, "items_per_s", r->items_per_s);
    static const char *axes[BP_AXES] = {"dp", "pp", "tp", "embed"};
    const double *split[2] = {r->axis_bytes, r->axis_exposed_ms};
    const char *names[2] = {"axis_bytes", "axis_exposed_ms"};
    for (int k = 0; k < 2; k++) {
        fprintf(m->f, ",\"%s\":{", names[k]);
        for (int a = 0; a < BP_AXES; a++)
            fprintf(m->f, "%s\"%s\":%.9g", a ? "," : "", axes[a], isfinite(split[k][a]) ? split[k][a] : 0);
        fputc('}', m->f);
    }
    fputs("}\n", m->f);
    flush(m);
}

void bp_metrics_eval(bp_metrics *m, int64_t step, double loss, double accuracy) {
    if (!m->f) return;
    fprintf(m->f, "{\"type\":\"eval\",\"step\":%" PRId64, step);
    num(m->f, "val_loss", loss);
    if (!isnan(accuracy)) num(m->f, "val_acc", accuracy);
    fputs("}\n", m->f);
    flush(m);
}

void bp_metrics_summary(bp_metrics *m, const bp_memory_record *r) {
    if (!m->f) return;
    fprintf(m->f, "{\"type\":\"summary\",\"steps\":%" PRId64, r->steps);
    num(m->f, "median_step_ms", r->median_step_ms);
    fprintf(m->f,
            ",\"peak_rss_bytes\":%" PRIu64 ",\"param_bytes\":%" PRIu64 ",\"grad_bytes\":%" PRIu64
            ",\"optim_bytes\":%" PRIu64 ",\"act_bytes\":%" PRIu64,
            r->peak_rss_bytes, r->param_bytes, r->grad_bytes, r->optim_bytes, r->act_bytes);
    if (isfinite(r->device_work_ms)) /* emulated */
        fprintf(m->f, ",\"device_work_ms\":%.9g,\"device_peak_bytes\":%" PRIu64,
                r->device_work_ms, r->device_peak_bytes);
    fputs("}\n", m->f);
    flush(m);
}

void bp_metrics_config(bp_metrics *m, const bp_config_record *r) {
    if (!m->f) return;
    fprintf(m->f,
            "{\"type\":\"config\",\"model\":\"%s\",\"params\":%zu,\"world\":%d,\"dp\":%d,"
            "\"pp\":%d,\"partition\":\"%s\",\"pipelines\":%d,\"micro_batches\":%d,"
            "\"schedule\":\"%s\",\"batch\":%d,\"grad_accum\":%d,\"dp_algo\":\"%s\","
            "\"net\":\"%s\"",
            r->model, r->params, r->world, r->dp, r->pp, r->partition, r->pipelines,
            r->micro_batches, r->schedule, r->batch, r->grad_accum, r->dp_algo, r->net);
    /* Emulated: nothing is computed, and times are the device's (wall / dilation). */
    if (r->device)
        fprintf(m->f,
                ",\"device\":\"%s\",\"dilation\":%.9g,\"times\":\"emulated: wall time / "
                "dilation\",\"loss\":\"absent: not computed\"",
                r->device, r->dilation);
    fputs("}\n", m->f);
    flush(m);
}

void bp_metrics_bucket_tune(bp_metrics *m, int64_t step, int n, const double *size_mb,
                            const float *step_ms, double chosen_mb) {
    if (!m->f) return;
    fprintf(m->f, "{\"type\":\"bucket_tune\",\"step\":%" PRId64 ",\"size_mb\":[", step);
    for (int i = 0; i < n; i++) fprintf(m->f, "%s%.9g", i ? "," : "", size_mb[i]);
    fprintf(m->f, "],\"step_ms\":[");
    for (int i = 0; i < n; i++) {
        if (step_ms[i] < 0)
            fprintf(m->f, "%snull", i ? "," : "");
        else
            fprintf(m->f, "%s%.9g", i ? "," : "", step_ms[i]);
    }
    fprintf(m->f, "]");
    num(m->f, "chosen_mb", chosen_mb);
    fprintf(m->f, "}\n");
    fflush(m->f);
}

void bp_metrics_stages(bp_metrics *m, int S, const float *v) {
    if (!m->f) return;
    static const char *keys[BP_STAGE_KEYS] = {"busy_s",    "idle_s",   "peak_stash",
                                              "act_bytes_per_micro", "bwd_sends", "bwd_compressed",
                                              "bwd_rel_err"};
    fprintf(m->f, "{\"type\":\"stages\"");
    for (int k = 0; k < BP_STAGE_KEYS; k++) {
        fprintf(m->f, ",\"%s\":[", keys[k]);
        for (int s = 0; s < S; s++) fprintf(m->f, "%s%.9g", s ? "," : "", v[k * S + s]);
        fprintf(m->f, "]");
    }
    fprintf(m->f, "}\n");
    flush(m);
}
