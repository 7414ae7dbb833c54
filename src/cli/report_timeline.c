/* The pipeline timeline of a trace (report.h): one row per rank over the last two
 * steps of the trace; forward (light) and backward (dark) boxes coloured by their
 * position in the pipeline stream (micro-batch and AvgPipe pipeline) and labelled
 * F<i> / B<i>; a grey bar under a row where the stage waits for another (the
 * bubble), a blue bar over it where a collective runs. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/report.h"

static const unsigned palette[10] = {0x4e79a7, 0xf28e2b, 0xe15759, 0x76b7b2, 0x59a14f,
                                     0xedc948, 0xb07aa1, 0xff9da7, 0x9c755f, 0xbab0ac};

/* c mixed with white: share w of white. */
static unsigned lighten(unsigned c, double w) {
    unsigned out = 0;
    for (int sh = 0; sh < 24; sh += 8) {
        double v = (double)((c >> sh) & 0xff);
        out |= (unsigned)lround(v + (255 - v) * w) << sh;
    }
    return out;
}

typedef struct window {
    int64_t first, last; /* steps shown */
    double t0, t1;       /* microseconds */
    int pipelines;       /* highest pipeline index + 1 */
} window;

/* The last two steps of the trace, from the start of the earliest rank's step to
 * the end of the latest (evaluation between steps is left out). */
static window choose_window(const bp_tracelog *t) {
    window w = {.first = -1, .last = -1, .t0 = INFINITY, .t1 = -INFINITY, .pipelines = 1};
    for (int k = 0; k < t->n; k++)
        if (t->spans[k].kind == BP_SPAN_STEP && t->spans[k].step > w.last)
            w.last = t->spans[k].step;
    w.first = w.last > 1 ? w.last - 1 : w.last;
    for (int k = 0; k < t->n; k++) {
        const bp_span *s = &t->spans[k];
        if (s->pipeline + 1 > w.pipelines) w.pipelines = s->pipeline + 1;
        if (s->kind != BP_SPAN_STEP || s->step < w.first || s->step > w.last) continue;
        w.t0 = fmin(w.t0, s->ts), w.t1 = fmax(w.t1, s->ts + s->dur);
    }
    return w;
}

/* Box of span s: x from its start to end in ms; y: its rank's row (rows grow
 * downwards): work fills the row, waits are a thin grey bar in its middle,
 * collectives a thin bar under it. */
static void put_box(FILE *f, FILE *labels, const bp_span *s, const window *w) {
    double x0 = (s->ts - w->t0) * 1e-3, x1 = (s->ts + s->dur - w->t0) * 1e-3;
    double y0 = s->pid - 0.3, y1 = s->pid + 0.3;
    unsigned color = 0xb0b0b0;
    if (s->kind == BP_SPAN_PP_WAIT) y0 = s->pid - 0.06, y1 = s->pid + 0.06;
    if (s->kind == BP_SPAN_COLLECTIVE) y0 = s->pid + 0.33, y1 = s->pid + 0.42, color = 0x1f3f8f;
    if (s->kind <= BP_SPAN_BACKWARD) {
        /* Indices up to 2^30 each (runlog.h): their product needs 64 bits. */
        long long v = (long long)(s->micro > 0 ? s->micro : 0) * w->pipelines +
                      (s->pipeline > 0 ? s->pipeline : 0);
        color = palette[v % 10];
        if (s->kind == BP_SPAN_FORWARD) color = lighten(color, 0.55);
    }
    fprintf(f, "%.4f %.3f %.4f %.4f %.3f %.3f %u\n", (x0 + x1) / 2, s->pid + 0.0, x0, x1, y0, y1,
            color);
    if (s->kind > BP_SPAN_BACKWARD || x1 - x0 < (w->t1 - w->t0) * 1e-3 / 70) return;
    fprintf(labels, "%.4f %d \"%c%d", (x0 + x1) / 2, s->pid, s->kind == BP_SPAN_FORWARD ? 'F' : 'B',
            s->micro);
    if (w->pipelines > 1) fprintf(labels, "/%d", s->pipeline);
    fprintf(labels, "\"\n");
}

static bp_status write_data(report *r, int i, const bp_tracelog *t, const window *w, bp_err *err) {
    char boxes[64], labels[64];
    snprintf(boxes, sizeof boxes, "run%d_timeline.dat", i + 1);
    snprintf(labels, sizeof labels, "run%d_timeline_labels.dat", i + 1);
    FILE *f = report_open(r, boxes, err), *g = f ? report_open(r, labels, err) : NULL;
    if (!g) {
        if (f) fclose(f);
        return BP_EIO;
    }
    fprintf(f, "# x (ms), rank, x from, x to, y from, y to, colour (0xRRGGBB)\n");
    fprintf(g, "# x (ms), rank, label\n");
    for (int k = 0; k < t->n; k++) {
        const bp_span *s = &t->spans[k];
        bool in_steps = s->step >= w->first && s->step <= w->last;
        if (s->kind != BP_SPAN_STEP && in_steps && s->ts >= w->t0 && s->ts + s->dur <= w->t1)
            put_box(f, g, s, w);
    }
    bp_status rc = report_close(r, f, boxes, err);
    bp_status rc2 = report_close(r, g, labels, err);
    return rc ? rc : rc2;
}

/* The legend, drawn in the bottom margin at fixed places (gnuplot's own key
 * misjudges the width of the PNG's text and cuts entries off). */
static void legend(FILE *f) {
    static const struct {
        const char *color, *text;
    } items[] = {{"#b9cbdd", "forward (light)"},
                 {"#4e79a7", "backward (dark)"},
                 {"#b0b0b0", "waiting for another stage"},
                 {"#1f3f8f", "collective"}};
    for (int k = 0; k < 4; k++) {
        double x = 0.12 + 0.2 * k;
        fprintf(f, "set object %d rect from screen %.2f,0.02 to screen %.3f,0.045 fc rgb '%s' "
                   "fs solid noborder\nset label %d '%s' at screen %.3f,0.033 left\n",
                k + 1, x, x + 0.025, items[k].color, k + 1, items[k].text, x + 0.032);
    }
}

static void write_script(report *r, int i, FILE *f, const bp_tracelog *t, const window *w) {
    char name[64];
    snprintf(name, sizeof name, "timeline_run%d", i + 1);
    report_gp_begin(f, name, 1200, 220 + 70 * t->n_procs);
    fprintf(f, "set title '");
    report_gp_quote(f, r->runs[i].label);
    fprintf(f, ": pipeline timeline of steps %lld-%lld'\n", (long long)w->first,
            (long long)w->last);
    fprintf(f, "set xlabel 'time since the first forward shown (ms); boxes coloured and labelled "
               "by %s'\nset xrange [0:%.4f]\n"
               "set yrange [%d.6:-0.6]\nset ytics (",
            w->pipelines > 1 ? "micro-batch/pipeline" : "micro-batch", (w->t1 - w->t0) * 1e-3,
            t->n_procs - 1);
    for (int p = 0; p < t->n_procs; p++) {
        fprintf(f, "%s'", p ? ", " : "");
        report_gp_quote(f, t->proc_name[p]);
        fprintf(f, "' %d", p);
    }
    fprintf(f, ")\nset grid noytics\nunset key\nset bmargin 6\n");
    legend(f);
    fprintf(f, "set style fill solid 1.0 noborder\nplot \\\n"
               "  'run%d_timeline.dat' using 1:2:3:4:5:6:7 with boxxyerror lc rgb variable, \\\n"
               "  'run%d_timeline_labels.dat' using 1:2:3 with labels font ',9'\n",
            i + 1, i + 1);
    report_gp_end(f);
}

bp_status report_plot_timeline(report *r, int i, bp_err *err) {
    const bp_tracelog *t = &r->runs[i].trace;
    window w = choose_window(t);
    bp_status rc = write_data(r, i, t, &w, err);
    char name[64], file[80];
    snprintf(name, sizeof name, "timeline_run%d", i + 1);
    snprintf(file, sizeof file, "%s.gp", name);
    FILE *f = rc ? NULL : report_open(r, file, err);
    if (f) {
        write_script(r, i, f, t, &w);
        rc = report_close(r, f, file, err);
    } else if (!rc) {
        rc = BP_EIO;
    }
    char caption[512];
    snprintf(caption, sizeof caption,
             "%s: the pipeline timeline of steps %lld-%lld from trace.json, one row per rank; "
             "forward and backward of each micro-batch; the gaps are the bubble.",
             r->runs[i].name, (long long)w.first, (long long)w.last);
    if (rc == BP_OK) report_add_plot(r, name, caption);
    return rc;
}
