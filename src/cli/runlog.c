#include "cli/runlog.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"
#include "core/json.h"

static const char *axis_keys[BP_AXES] = {"dp", "pp", "tp", "embed"};

/* Number member key of object obj; NaN when absent or not a number (null). */
static double num(const bp_json *j, int obj, const char *key) {
    int i = bp_json_get(j, obj, key);
    return i >= 0 && j->nodes[i].type == BP_JSON_NUMBER ? j->nodes[i].num : NAN;
}

/* Where a record lies, for the messages that refuse it. */
typedef struct where {
    const char *path;
    long line;
} where;

/* Integer member key of object obj into *out: a whole number from 0 to hi, or
 * absent (then *out = absent when absent >= -1, refused when absent < -1). A double
 * converts to an integer only inside the integer's range, so anything else (1e300,
 * -5, 2.5, null) refuses the record, naming the file and line. */
static bp_status int_member(const bp_json *j, int obj, const char *key, double hi, int64_t absent,
                            const where *at, int64_t *out, bp_err *err) {
    int i = bp_json_get(j, obj, key);
    if (i < 0 && absent >= -1) {
        *out = absent;
        return BP_OK;
    }
    if (i < 0) return bp_fail(err, BP_EFORMAT, "%s:%ld: \"%s\" is missing", at->path, at->line, key);
    double v = j->nodes[i].num;
    if (j->nodes[i].type != BP_JSON_NUMBER)
        return bp_fail(err, BP_EFORMAT, "%s:%ld: \"%s\" is not a number", at->path, at->line, key);
    if (!(v >= 0 && v <= hi && v == floor(v)))
        return bp_fail(err, BP_EFORMAT, "%s:%ld: \"%s\" is %.10g, not a whole number from 0 to %.0f",
                       at->path, at->line, key, v, hi);
    *out = (int64_t)v;
    return BP_OK;
}

/* Steps count up to 2^53, the last integer a JSON number holds exactly. */
#define STEP_MAX 9007199254740992.0
#define REQUIRED (-2)

static bool is_type(const bp_json *j, const char *type) {
    int i = bp_json_get(j, 0, "type");
    return i >= 0 && j->nodes[i].type == BP_JSON_STRING && bp_json_str_eq(j, i, type);
}

/* Append one element of `size` bytes to *arr of *n (doubling its room *cap). */
static void *grow(void **arr, int *n, int *cap, size_t size) {
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 64;
        void *bigger = realloc(*arr, (size_t)c * size);
        if (!bigger) return NULL;
        *arr = bigger, *cap = c;
    }
    return (char *)*arr + (size_t)(*n)++ * size;
}

static void read_config(const bp_json *j, bp_runlog *r) {
    r->n_config = 0;
    for (int c = j->nodes[0].child; c >= 0 && r->n_config < BP_RUNLOG_KEYS; c = j->nodes[c].next) {
        const bp_json_node *v = &j->nodes[c];
        char *key = r->key[r->n_config], *val = r->value[r->n_config];
        if (!bp_json_str_copy(j, v->key, key, sizeof r->key[0]) || strcmp(key, "type") == 0)
            continue;
        if (v->type == BP_JSON_STRING && !bp_json_str_copy(j, c, val, sizeof r->value[0]))
            snprintf(val, sizeof r->value[0], "(too long)");
        else if (v->type == BP_JSON_NUMBER)
            snprintf(val, sizeof r->value[0], "%.10g", v->num);
        else if (v->type != BP_JSON_STRING)
            snprintf(val, sizeof r->value[0], "%s",
                     v->type != BP_JSON_BOOL ? "" : v->num ? "true" : "false");
        r->n_config++;
    }
}

static void read_step(const bp_json *j, bp_runlog_step *s) {
    s->loss = num(j, 0, "loss");
    s->step_ms = num(j, 0, "step_ms");
    s->bytes_sent = num(j, 0, "bytes_sent");
    int ab = bp_json_get(j, 0, "axis_bytes"), ae = bp_json_get(j, 0, "axis_exposed_ms");
    for (int a = 0; a < BP_AXES; a++) {
        s->axis_bytes[a] = ab >= 0 ? num(j, ab, axis_keys[a]) : NAN;
        s->axis_exposed_ms[a] = ae >= 0 ? num(j, ae, axis_keys[a]) : NAN;
    }
}

/* An array member of numbers into a new array; its length in *n. */
static double *read_array(const bp_json *j, const char *key, int *n) {
    int a = bp_json_get(j, 0, key), k = 0;
    if (a < 0 || j->nodes[a].type != BP_JSON_ARRAY) return NULL;
    for (int c = j->nodes[a].child; c >= 0; c = j->nodes[c].next) k++;
    double *out = calloc((size_t)k + 1, sizeof *out);
    if (!out) return NULL;
    k = 0;
    for (int c = j->nodes[a].child; c >= 0; c = j->nodes[c].next)
        out[k++] = j->nodes[c].type == BP_JSON_NUMBER ? j->nodes[c].num : NAN;
    *n = k;
    return out;
}

static void read_stages(const bp_json *j, bp_runlog *r) {
    int nb = 0, ni = 0, ns = 0;
    free(r->busy_s), free(r->idle_s), free(r->peak_stash);
    r->busy_s = read_array(j, "busy_s", &nb);
    r->idle_s = read_array(j, "idle_s", &ni);
    r->peak_stash = read_array(j, "peak_stash", &ns);
    r->n_stages = r->busy_s && r->idle_s && r->peak_stash && nb == ni && nb == ns ? nb : 0;
}

/* One parsed record into r; step is its "step", checked. */
static bp_status read_record(const bp_json *j, int64_t step, bp_runlog *r, int *cap_s, int *cap_e,
                             bp_err *err) {
    if (is_type(j, "config")) {
        read_config(j, r);
    } else if (is_type(j, "step")) {
        bp_runlog_step *s = grow((void **)&r->steps, &r->n_steps, cap_s, sizeof *s);
        if (!s) return bp_fail(err, BP_ENOMEM, "out of memory");
        read_step(j, s);
        s->step = step;
    } else if (is_type(j, "eval")) {
        bp_runlog_eval *e = grow((void **)&r->evals, &r->n_evals, cap_e, sizeof *e);
        if (!e) return bp_fail(err, BP_ENOMEM, "out of memory");
        *e = (bp_runlog_eval){.step = step, .val_loss = num(j, 0, "val_loss")};
    } else if (is_type(j, "stages")) {
        read_stages(j, r);
    }
    return BP_OK;
}

static bp_status read_line(const char *line, size_t n, const where *at, bp_runlog *r, int *cap_s,
                           int *cap_e, bp_err *err) {
    bp_json j;
    bp_err ignored;
    if (n == 0 || line[0] != '{' || bp_json_parse(line, n, &j, &ignored) != BP_OK) return BP_OK;
    bp_status rc = BP_OK;
    int64_t step = 0;
    if (is_type(&j, "step") || is_type(&j, "eval"))
        rc = int_member(&j, 0, "step", STEP_MAX, REQUIRED, at, &step, err);
    if (rc == BP_OK) rc = read_record(&j, step, r, cap_s, cap_e, err);
    bp_json_free(&j);
    return rc;
}

/* Training time and samples at each evaluation, from the steps before it. */
static void place_evals(bp_runlog *r) {
    const char *b = bp_runlog_config(r, "batch"), *g = bp_runlog_config(r, "grad_accum");
    double per_step = (b ? atof(b) : NAN) * (g ? atof(g) : 1);
    double t = 0;
    int s = 0;
    for (int i = 0; i < r->n_evals; i++) {
        bp_runlog_eval *e = &r->evals[i];
        for (; s < r->n_steps && r->steps[s].step <= e->step; s++)
            if (isfinite(r->steps[s].step_ms)) t += r->steps[s].step_ms * 1e-3;
        e->train_s = t;
        e->samples = (double)e->step * per_step;
    }
}

bp_status bp_runlog_read(const char *path, bp_runlog *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    FILE *f = NULL;
    bp_status rc = bp_fopen_regular(path, &f, err);
    if (rc) return rc;
    char *line = NULL;
    size_t room = 0;
    ssize_t len;
    int cap_s = 0, cap_e = 0;
    where at = {path, 0};
    while (rc == BP_OK && (len = getline(&line, &room, f)) >= 0) {
        at.line++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) len--;
        rc = read_line(line, (size_t)len, &at, out, &cap_s, &cap_e, err);
    }
    free(line);
    fclose(f);
    if (rc == BP_OK && out->n_steps == 0)
        rc = bp_fail(err, BP_EFORMAT, "%s holds no step record", path);
    if (rc) {
        bp_runlog_free(out);
        return rc;
    }
    place_evals(out);
    return BP_OK;
}

void bp_runlog_free(bp_runlog *r) {
    free(r->steps);
    free(r->evals);
    free(r->busy_s);
    free(r->idle_s);
    free(r->peak_stash);
    memset(r, 0, sizeof *r);
}

const char *bp_runlog_config(const bp_runlog *r, const char *key) {
    for (int i = 0; i < r->n_config; i++)
        if (strcmp(r->key[i], key) == 0) return r->value[i];
    return NULL;
}

/* ---- traces ------------------------------------------------------------------------ */

static bool str_is(const bp_json *j, int obj, const char *key, const char *s) {
    int i = bp_json_get(j, obj, key);
    return i >= 0 && j->nodes[i].type == BP_JSON_STRING && bp_json_str_eq(j, i, s);
}

/* The kind of an "X" event, or -1 for events the timeline does not show. */
static int span_kind(const bp_json *j, int args) {
    if (str_is(j, 0, "name", "forward")) return BP_SPAN_FORWARD;
    if (str_is(j, 0, "name", "backward")) return BP_SPAN_BACKWARD;
    if (str_is(j, 0, "cat", "step")) return BP_SPAN_STEP;
    if (!str_is(j, 0, "cat", "comm")) return -1;
    bool waits = str_is(j, 0, "name", "recv") || str_is(j, 0, "name", "wait isend") ||
                 str_is(j, 0, "name", "wait irecv");
    if (str_is(j, args, "axis", "pp") && waits) return BP_SPAN_PP_WAIT;
    return bp_json_get(j, args, "peer") < 0 && bp_json_get(j, args, "group") >= 0
               ? BP_SPAN_COLLECTIVE
               : -1;
}

static bp_status name_proc(bp_tracelog *t, const bp_json *j, int pid) {
    if (pid >= t->n_procs) {
        void *bigger = realloc(t->proc_name, (size_t)(pid + 1) * sizeof *t->proc_name);
        if (!bigger) return BP_ENOMEM;
        t->proc_name = bigger;
        for (int p = t->n_procs; p <= pid; p++)
            snprintf(t->proc_name[p], sizeof t->proc_name[p], "rank %d", p);
        t->n_procs = pid + 1;
    }
    int name = bp_json_get(j, bp_json_get(j, 0, "args"), "name");
    char text[sizeof t->proc_name[0]];
    /* A name too long leaves text unterminated: the row keeps "rank N". */
    if (str_is(j, 0, "name", "process_name") && bp_json_str_copy(j, name, text, sizeof text))
        memcpy(t->proc_name[pid], text, sizeof text);
    return BP_OK;
}

/* Ranks name rows of a plot, so at most 2^20; micro-batch and pipeline indices fit
 * an int with room for one more. */
#define PID_MAX ((1 << 20) - 1)
#define INDEX_MAX ((double)(1 << 30))

static bp_status trace_line(bp_tracelog *t, const bp_json *j, const where *at, int *cap,
                            bp_err *err) {
    int64_t pid, step, micro, pipeline;
    bp_status rc = int_member(j, 0, "pid", PID_MAX, REQUIRED, at, &pid, err);
    if (rc == BP_OK && name_proc(t, j, (int)pid)) rc = bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc || !str_is(j, 0, "ph", "X")) return rc;
    int args = bp_json_get(j, 0, "args"), kind = span_kind(j, args);
    if (kind < 0) return BP_OK;
    rc = int_member(j, args, "step", STEP_MAX, REQUIRED, at, &step, err);
    if (rc == BP_OK) rc = int_member(j, args, "micro", INDEX_MAX, -1, at, &micro, err);
    if (rc == BP_OK) rc = int_member(j, args, "pipeline", INDEX_MAX, -1, at, &pipeline, err);
    if (rc) return rc;
    bp_span *s = grow((void **)&t->spans, &t->n, cap, sizeof *s);
    if (!s) return bp_fail(err, BP_ENOMEM, "out of memory");
    *s = (bp_span){.pid = (int)pid,
                   .kind = (bp_span_kind)kind,
                   .ts = num(j, 0, "ts"),
                   .dur = num(j, 0, "dur"),
                   .step = step,
                   .micro = (int)micro,
                   .pipeline = (int)pipeline};
    if (!isfinite(s->ts) || !isfinite(s->dur)) t->n--;
    return BP_OK;
}

bp_status bp_tracelog_read(const char *path, bp_tracelog *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    FILE *f = NULL;
    bp_status rc = bp_fopen_regular(path, &f, err);
    if (rc) return rc;
    char *line = NULL;
    size_t room = 0;
    ssize_t len;
    int cap = 0;
    where at = {path, 0};
    while (rc == BP_OK && (len = getline(&line, &room, f)) >= 0) {
        at.line++;
        while (len > 0 && strchr("\r\n,", line[len - 1])) len--;
        bp_json j;
        bp_err ignored;
        if (len == 0 || line[0] != '{' || bp_json_parse(line, (size_t)len, &j, &ignored)) continue;
        if (bp_json_get(&j, 0, "ph") >= 0) rc = trace_line(out, &j, &at, &cap, err);
        bp_json_free(&j);
    }
    free(line);
    fclose(f);
    bool steps = false;
    for (int k = 0; k < out->n && !steps; k++) steps = out->spans[k].kind == BP_SPAN_STEP;
    if (rc == BP_OK && !steps) rc = bp_fail(err, BP_EFORMAT, "%s holds no step event", path);
    if (rc) bp_tracelog_free(out);
    return rc;
}

void bp_tracelog_free(bp_tracelog *t) {
    free(t->spans);
    free(t->proc_name);
    memset(t, 0, sizeof *t);
}
