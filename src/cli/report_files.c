/* Files of a report (report.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/report.h"
#include "core/file.h"

static bp_status tmp_path(const report *r, const char *name, char *path, size_t n, bool tmp,
                          bp_err *err) {
    int k = snprintf(path, n, "%s/%s%s", r->out, name, tmp ? ".tmp" : "");
    if (k > 0 && (size_t)k < n) return BP_OK;
    return bp_fail(err, BP_EUSAGE, "path too long: %s/%s", r->out, name);
}

FILE *report_open(const report *r, const char *name, bp_err *err) {
    char path[BP_PATH_MAX];
    if (tmp_path(r, name, path, sizeof path, true, err)) return NULL;
    FILE *f = fopen(path, "w");
    if (!f) bp_fail(err, BP_EIO, "cannot create %s: %s", path, strerror(errno));
    return f;
}

bp_status report_close(const report *r, FILE *f, const char *name, bp_err *err) {
    char tmp[BP_PATH_MAX], path[BP_PATH_MAX];
    bool bad = ferror(f) != 0;
    bad = fclose(f) != 0 || bad;
    bp_status rc = tmp_path(r, name, tmp, sizeof tmp, true, err);
    if (rc == BP_OK) rc = tmp_path(r, name, path, sizeof path, false, err);
    if (rc == BP_OK && (bad || rename(tmp, path) != 0)) {
        rc = bp_fail(err, BP_EIO, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    return rc;
}

void report_gp_quote(FILE *f, const char *s) {
    for (; *s; s++) {
        if (*s == '\'') fputc('\'', f);
        if (*s != '\n') fputc(*s, f);
    }
}

void report_gp_begin(FILE *f, const char *name, int width, int height) {
    fprintf(f,
            "# Written by bagpipe report; edit and run `gnuplot %s.gp` in this folder to redraw\n"
            "# %s.svg and %s.png.\n"
            "do for [format in \"svg png\"] {\n"
            "if (format eq \"svg\") {\n"
            "  set terminal svg size %d,%d dynamic noenhanced font 'Helvetica,13' \\\n"
            "    background '#ffffff'\n"
            "} else {\n"
            "  set terminal pngcairo size %d,%d noenhanced font 'Helvetica,11' \\\n"
            "    background '#ffffff'\n"
            "}\n"
            "set output '%s.'.format\n"
            "reset\n"
            "set grid lc rgb '#dddddd'\n"
            "set border lc rgb '#444444'\n",
            name, name, name, width, height, width, height, name);
}

void report_gp_end(FILE *f) {
    fprintf(f, "unset multiplot\nset output\n}\n");
}

void report_add_plot(report *r, const char *name, const char *caption) {
    if (r->n_plots == (int)(sizeof r->plots / sizeof r->plots[0])) return;
    report_plot *p = &r->plots[r->n_plots++];
    snprintf(p->name, sizeof p->name, "%s", name);
    snprintf(p->caption, sizeof p->caption, "%s", caption);
}
