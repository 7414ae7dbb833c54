/* bagpipe report: plots of finished runs, drawn by gnuplot.
 *
 * For every plot the report writes its data (.dat, whitespace-separated columns
 * with a header comment) and a gnuplot script (.gp) into the output folder, then
 * runs gnuplot there on the script, which writes the SVG and the PNG; so a user can
 * edit a script and run `gnuplot NAME.gp` in that folder again. index.html places
 * the plots next to each run's configuration. */
#ifndef BP_CLI_REPORT_H
#define BP_CLI_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "bagpipe/status.h"
#include "cli/runlog.h"

typedef struct report_run {
    const char *dir;   /* as given */
    char name[128];    /* short name: the folder's last component */
    char label[320];   /* legend: name and the configuration that tells runs apart */
    bp_runlog log;
    bp_tracelog trace;
    bool has_trace; /* trace.json read into trace */
} report_run;

typedef struct report_plot {
    char name[64];     /* NAME.gp -> NAME.svg, NAME.png */
    char caption[512];
} report_plot;

typedef struct report {
    const char *out;
    report_run *runs;
    int n_runs;
    report_plot plots[64];
    int n_plots;
    int loss_points[2]; /* points the loss plots can draw: by time, by samples */
} report;

/* report.c: the command; returns the exit code. */
int report_main(int argc, char **argv);
/* report_index.c: index.html with the plots and the runs' configurations. */
bp_status report_index(const report *r, bp_err *err);

/* report_files.c: files in the output folder, written under a temporary name and
 * renamed when complete. */
FILE *report_open(const report *r, const char *name, bp_err *err);
bp_status report_close(const report *r, FILE *f, const char *name, bp_err *err);
/* s as a gnuplot single-quoted string's contents ('' for '). */
void report_gp_quote(FILE *f, const char *s);
/* The start of every script: both terminals in turn, NAME.svg then NAME.png, of
 * the given size in pixels; the caller writes the body, then report_gp_end. */
void report_gp_begin(FILE *f, const char *name, int width, int height);
void report_gp_end(FILE *f);
/* Add a plot to the index (the first 64). */
void report_add_plot(report *r, const char *name, const char *caption);

/* report_plots.c: each adds its plot (name and caption) to r->plots. */
bp_status report_plot_loss(report *r, bool by_time, bp_err *err);
bp_status report_plot_comm(report *r, int i, bp_err *err);
bp_status report_plot_stages(report *r, int i, bp_err *err);
/* report_timeline.c: the pipeline timeline of run i's trace. */
bp_status report_plot_timeline(report *r, int i, bp_err *err);

#endif
