/* index.html of a report (report.h): the runs' configurations in one table (a
 * column per run, a row per key of the config records), then every plot. */
#include <stdio.h>
#include <string.h>

#include "cli/report.h"

static void html(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

/* Whether key appears in an earlier run's config than run i's position k. */
static bool seen_before(const report *r, int i, int k) {
    const char *key = r->runs[i].log.key[k];
    for (int j = 0; j < i; j++)
        if (bp_runlog_config(&r->runs[j].log, key)) return true;
    for (int m = 0; m < k; m++)
        if (strcmp(r->runs[i].log.key[m], key) == 0) return true;
    return false;
}

static void config_table(FILE *f, const report *r) {
    fputs("<table>\n<tr><th>run</th>", f);
    for (int i = 0; i < r->n_runs; i++) {
        fprintf(f, "<th>%d. ", i + 1);
        html(f, r->runs[i].dir);
        fputs("</th>", f);
    }
    fputs("</tr>\n", f);
    for (int i = 0; i < r->n_runs; i++)
        for (int k = 0; k < r->runs[i].log.n_config; k++) {
            if (seen_before(r, i, k)) continue;
            const char *key = r->runs[i].log.key[k];
            fputs("<tr><td>", f);
            html(f, key);
            fputs("</td>", f);
            for (int j = 0; j < r->n_runs; j++) {
                const char *v = bp_runlog_config(&r->runs[j].log, key);
                fputs("<td>", f);
                html(f, v ? v : "");
                fputs("</td>", f);
            }
            fputs("</tr>\n", f);
        }
    fputs("<tr><td>steps logged</td>", f);
    for (int j = 0; j < r->n_runs; j++) fprintf(f, "<td>%d</td>", r->runs[j].log.n_steps);
    fputs("</tr>\n</table>\n", f);
}

bp_status report_index(const report *r, bp_err *err) {
    FILE *f = report_open(r, "index.html", err);
    if (!f) return BP_EIO;
    fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
          "<title>bagpipe report</title>\n<style>\n"
          "body { font-family: sans-serif; margin: 2em; max-width: 1250px; }\n"
          "table { border-collapse: collapse; font-size: 90%; }\n"
          "td, th { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; }\n"
          "figure { margin: 2em 0; } img { max-width: 100%; border: 1px solid #eee; }\n"
          "</style>\n</head>\n<body>\n<h1>bagpipe report</h1>\n<h2>Runs</h2>\n<ol>\n", f);
    for (int i = 0; i < r->n_runs; i++) {
        fputs("<li>", f);
        html(f, r->runs[i].label);
        fputs(r->runs[i].has_trace ? " (with trace.json)</li>\n" : "</li>\n", f);
    }
    fputs("</ol>\n<h2>Configurations</h2>\n", f);
    config_table(f, r);
    fputs("<h2>Plots</h2>\n<p>Each plot's data (<code>.dat</code>) and gnuplot script "
          "(<code>.gp</code>) are in this folder: edit a script and run "
          "<code>gnuplot NAME.gp</code> here to redraw it.</p>\n", f);
    for (int k = 0; k < r->n_plots; k++) {
        const char *n = r->plots[k].name;
        fprintf(f, "<figure id=\"%s\">\n<img src=\"%s.svg\" alt=\"%s\">\n<figcaption>", n, n, n);
        html(f, r->plots[k].caption);
        fprintf(f, " <a href=\"%s.png\">PNG</a> <a href=\"%s.gp\">script</a></figcaption>\n"
                   "</figure>\n", n, n);
    }
    fputs("</body>\n</html>\n", f);
    return report_close(r, f, "index.html", err);
}
