/* Plots of the metrics log (report.h): loss, communication per axis, stages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/report.h"
#include "core/log.h"
#include "nn/model.h"

static const char *axis_names[BP_AXES] = {"dp", "pp", "tp", "embed"};
static const char *axis_colors[BP_AXES] = {"#4e79a7", "#f28e2b", "#59a14f", "#b07aa1"};

/* NaN as gnuplot's missing value. */
static void put_num(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, " %.9g", v);
    else fprintf(f, " NaN");
}

/* ---- loss ------------------------------------------------------------------------ */

/* One line of a loss data file; counts the points gnuplot can draw by time and by
 * samples (a diverged run logs null losses, and a plot without a single point is
 * an error to gnuplot). */
static void put_loss(FILE *f, report *r, int64_t step, double t, double samples, double loss) {
    fprintf(f, "%lld", (long long)step);
    put_num(f, t), put_num(f, samples), put_num(f, loss), fputc('\n', f);
    r->loss_points[0] += isfinite(t) && isfinite(loss);
    r->loss_points[1] += isfinite(samples) && isfinite(loss);
}

/* Whether run l's loss plot shows its validation loss: it has an evaluation with a
 * finite loss (a run that diverged before its first evaluation has none; its
 * training loss shows the steps before). */
static bool by_evals(const bp_runlog *l) {
    for (int k = 0; k < l->n_evals; k++)
        if (isfinite(l->evals[k].val_loss)) return true;
    return false;
}

/* run<i>_loss.dat: validation loss at each evaluation (or, for a run without a
 * finite one, the training loss of every step), against time and samples. */
static bp_status write_loss_data(report *r, int i, bp_err *err) {
    char name[64];
    snprintf(name, sizeof name, "run%d_loss.dat", i + 1);
    FILE *f = report_open(r, name, err);
    if (!f) return BP_EIO;
    const bp_runlog *l = &r->runs[i].log;
    fprintf(f, "# %s: step, training time (s), samples, loss (nats)\n", r->runs[i].dir);
    const char *b = bp_runlog_config(l, "batch"), *g = bp_runlog_config(l, "grad_accum");
    double per_step = (b ? atof(b) : NAN) * (g ? atof(g) : 1), t = 0;
    bool evals = by_evals(l);
    for (int k = 0; evals && k < l->n_evals; k++) {
        const bp_runlog_eval *e = &l->evals[k];
        put_loss(f, r, e->step, e->train_s, e->samples, e->val_loss);
    }
    for (int k = 0; !evals && k < l->n_steps; k++) {
        const bp_runlog_step *s = &l->steps[k];
        if (isfinite(s->step_ms)) t += s->step_ms * 1e-3;
        put_loss(f, r, s->step, t, (double)s->step * per_step, s->loss);
    }
    return report_close(r, f, name, err);
}

/* The model kind of every run, or NULL when they differ or one is not known. */
static const bp_model_facts *runs_model(const report *r) {
    const bp_model_facts *all = NULL;
    for (int i = 0; i < r->n_runs; i++) {
        const char *m = bp_runlog_config(&r->runs[i].log, "model");
        bp_model_kind kind;
        if (!m || bp_model_kind_parse(m, &kind, NULL)) return NULL;
        const bp_model_facts *f = bp_model_kind_facts(kind);
        if (all && f != all) return NULL;
        all = f;
    }
    return all;
}

/* The unit of the loss and of a sample, from the models of the runs. */
static void loss_units(const report *r, char *loss, size_t n, const char **sample) {
    const bp_model_facts *f = runs_model(r);
    snprintf(loss, n, "nats%s%s", f ? "/" : "", f ? f->loss_per : "");
    *sample = f ? f->sample : "samples";
}

bp_status report_plot_loss(report *r, bool by_time, bp_err *err) {
    bp_status rc = BP_OK;
    int evals = 0;
    for (int i = 0; rc == BP_OK && i < r->n_runs; i++) {
        if (by_time) rc = write_loss_data(r, i, err);
        evals += by_evals(&r->runs[i].log);
    }
    const char *name = by_time ? "loss_time" : "loss_samples", *sample;
    char unit[32];
    if (rc == BP_OK && r->loss_points[by_time ? 0 : 1] == 0) {
        bp_log_warn("report: no run has a finite loss at a known %s (diverged?): %s is left out",
                    by_time ? "time" : "sample count", name);
        return BP_OK;
    }
    loss_units(r, unit, sizeof unit, &sample);
    char file[80];
    snprintf(file, sizeof file, "%s.gp", name);
    FILE *f = rc ? NULL : report_open(r, file, err);
    if (!f) return rc ? rc : BP_EIO;
    report_gp_begin(f, name, 960, 560);
    const char *what = evals == r->n_runs ? "validation loss"
                       : evals        ? "loss (validation; training where a run has no evaluation)"
                                      : "training loss";
    fprintf(f, "set title '%s against %s'\n", what, by_time ? "training time" : "samples seen");
    fprintf(f, "set xlabel '%s'\nset ylabel '%s (%s)'\nset key top right opaque\n",
            by_time ? "training time (s, sum of step times)" : "samples", what, unit);
    if (!by_time) fprintf(f, "set xlabel 'samples seen (%s)'\n", sample);
    fprintf(f, "plot \\\n");
    for (int i = 0; i < r->n_runs; i++) {
        fprintf(f, "  'run%d_loss.dat' using %d:4 with linespoints lw 2 pt 7 ps 0.6 title '", i + 1,
                by_time ? 2 : 3);
        report_gp_quote(f, r->runs[i].label);
        fprintf(f, "'%s\n", i + 1 < r->n_runs ? ", \\" : "");
    }
    report_gp_end(f);
    char caption[512];
    snprintf(caption, sizeof caption, "%s of every run against %s.", what,
             by_time ? "training time (the sum of the step times before each evaluation)"
                     : "the samples seen (steps x batch x gradient accumulation)");
    caption[0] = (char)(caption[0] - 'a' + 'A');
    report_add_plot(r, name, caption);
    return report_close(r, f, file, err);
}

/* ---- communication per axis -------------------------------------------------------- */

static bp_status write_steps_data(report *r, int i, bool *used, bp_err *err) {
    char name[64];
    snprintf(name, sizeof name, "run%d_steps.dat", i + 1);
    FILE *f = report_open(r, name, err);
    if (!f) return BP_EIO;
    const bp_runlog *l = &r->runs[i].log;
    fprintf(f, "# %s: step, bytes sent by all ranks on dp pp tp embed (MB), exposed "
               "communication of rank 0 on dp pp tp embed (ms), step time (ms)\n", r->runs[i].dir);
    for (int k = 0; k < l->n_steps; k++) {
        const bp_runlog_step *s = &l->steps[k];
        fprintf(f, "%lld", (long long)s->step);
        for (int a = 0; a < BP_AXES; a++) put_num(f, s->axis_bytes[a] * 1e-6);
        for (int a = 0; a < BP_AXES; a++) put_num(f, s->axis_exposed_ms[a]);
        put_num(f, s->step_ms), fputc('\n', f);
        for (int a = 0; a < BP_AXES; a++)
            used[a] = used[a] || s->axis_bytes[a] > 0 || s->axis_exposed_ms[a] > 0;
    }
    return report_close(r, f, name, err);
}

/* One panel: column base + a of the steps data for every axis used. */
static void comm_panel(FILE *f, int i, const bool *used, int base) {
    int n = 0;
    for (int a = 0; a < BP_AXES; a++) n += used[a];
    fprintf(f, "plot \\\n");
    for (int a = 0, k = 0; a < BP_AXES; a++) {
        if (!used[a]) continue;
        fprintf(f, "  'run%d_steps.dat' using 1:%d with lines lw 1.5 lc rgb '%s' title '%s'%s\n",
                i + 1, base + a, axis_colors[a], axis_names[a], ++k < n ? ", \\" : "");
    }
}

bp_status report_plot_comm(report *r, int i, bp_err *err) {
    bool used[BP_AXES] = {false};
    bp_status rc = write_steps_data(r, i, used, err);
    if (rc) return rc;
    if (!used[0] && !used[1] && !used[2] && !used[3]) used[0] = true; /* one process: all zero */
    char name[64], file[80];
    snprintf(name, sizeof name, "comm_run%d", i + 1);
    snprintf(file, sizeof file, "%s.gp", name);
    FILE *f = report_open(r, file, err);
    if (!f) return BP_EIO;
    report_gp_begin(f, name, 960, 720);
    fprintf(f, "set multiplot layout 2,1 title '");
    report_gp_quote(f, r->runs[i].label);
    fprintf(f, ": communication per step and axis'\nset key top right opaque\n"
               "set ylabel 'bytes sent per step, all ranks (MB)'\nset yrange [0:*]\n");
    comm_panel(f, i, used, 2);
    fprintf(f, "set ylabel 'exposed communication per step, rank 0 (ms)'\nset xlabel 'step'\n");
    comm_panel(f, i, used, 2 + BP_AXES);
    report_gp_end(f);
    char caption[512];
    snprintf(caption, sizeof caption,
             "%s: bytes sent per step by all ranks (top) and communication time rank 0 waited "
             "for (bottom), by axis of the grid (embed: the tied embedding's sync; pp's "
             "exposed time is the pipeline bubble).", r->runs[i].name);
    report_add_plot(r, name, caption);
    return report_close(r, f, file, err);
}

/* ---- pipeline stages ---------------------------------------------------------------- */

static double stash_max(const bp_runlog *l) {
    double m = 0;
    for (int s = 0; s < l->n_stages; s++)
        if (l->peak_stash[s] > m) m = l->peak_stash[s];
    return m;
}

bp_status report_plot_stages(report *r, int i, bp_err *err) {
    const bp_runlog *l = &r->runs[i].log;
    char name[64], file[80];
    snprintf(name, sizeof name, "run%d_stages.dat", i + 1);
    FILE *f = report_open(r, name, err);
    if (!f) return BP_EIO;
    fprintf(f, "# %s: stage, busy (s), idle (s), peak stash (micro-batches)\n", r->runs[i].dir);
    for (int s = 0; s < l->n_stages; s++) {
        fprintf(f, "%d", s);
        put_num(f, l->busy_s[s]), put_num(f, l->idle_s[s]), put_num(f, l->peak_stash[s]);
        fputc('\n', f);
    }
    bp_status rc = report_close(r, f, name, err);
    snprintf(name, sizeof name, "stages_run%d", i + 1);
    snprintf(file, sizeof file, "%s.gp", name);
    if (rc || !(f = report_open(r, file, err))) return rc ? rc : BP_EIO;
    report_gp_begin(f, name, 960, 560);
    fprintf(f, "set title '");
    report_gp_quote(f, r->runs[i].label);
    fprintf(f, ": pipeline stages over the run'\n"
               "set xlabel 'pipeline stage'\nset ylabel 'time over the run (s)'\n"
               "set y2label 'peak stash (micro-batches held at once)'\n"
               "set xrange [-0.6:%d.4]\nset xtics 1\nset yrange [0:*]\nset y2range [0:%g]\n"
               "set ytics nomirror\nset y2tics 1\nset boxwidth 0.35\nset style fill solid 0.85\n"
               "set key outside bottom center horizontal\nplot \\\n"
               "  'run%d_stages.dat' using ($1-0.18):2 with boxes lc rgb '#4e79a7' \\\n"
               "    title 'busy (forward and backward)', \\\n"
               "  '' using ($1+0.18):3 with boxes lc rgb '#e15759' \\\n"
               "    title 'idle (waiting for other stages: the bubble)', \\\n"
               "  '' using 1:4 axes x1y2 with linespoints lw 2 pt 7 ps 1.2 lc rgb '#222222' \\\n"
               "    title 'peak stash (right axis)'\n",
            l->n_stages - 1, stash_max(l) + 1, i + 1);
    report_gp_end(f);
    char caption[512];
    snprintf(caption, sizeof caption,
             "%s: each pipeline stage's time computing and idle over the whole run (replica 0), "
             "and the most micro-batches whose activations it held at once.", r->runs[i].name);
    report_add_plot(r, name, caption);
    return report_close(r, f, file, err);
}
