/* bagpipe report RUN... --out DIR (report.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/report.h"
#include "core/file.h"
#include "core/log.h"

static void usage(FILE *f) {
    fprintf(f, "usage: bagpipe report RUN... --out DIR\n\n"
               "Plots of finished runs (RUN: the --out folder of bagpipe train, with its\n"
               "metrics.jsonl and, when run with --trace RUN/trace.json, its trace), drawn by\n"
               "gnuplot as SVG and PNG into DIR with the data and the script of each plot, and\n"
               "DIR/index.html that shows them with the runs' configurations:\n"
               "  loss_time, loss_samples   validation loss of every run against time and samples\n"
               "  comm_runK                 bytes and exposed communication per axis and step\n"
               "  stages_runK               each pipeline stage's busy and idle time and stash\n"
               "  timeline_runK             the pipeline timeline of the trace (the bubble)\n\n"
               "options:\n  --out DIR   where the report goes (created)\n");
}

static bp_status parse_args(int argc, char **argv, report *r, bool *help, bp_err *err) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            *help = true;
        } else if (strcmp(a, "--out") == 0) {
            if (i + 1 == argc) return bp_fail(err, BP_EUSAGE, "option --out: needs a folder");
            r->out = argv[++i];
        } else if (strncmp(a, "--out=", 6) == 0) {
            r->out = a + 6;
        } else if (a[0] == '-' && a[1]) {
            return bp_fail(err, BP_EUSAGE, "unknown option '%s' (see bagpipe report --help)", a);
        } else {
            r->runs[r->n_runs++].dir = a;
        }
    }
    if (*help) return BP_OK;
    if (r->n_runs == 0) return bp_fail(err, BP_EUSAGE, "report: no RUN folder given (see --help)");
    if (!r->out || !r->out[0]) return bp_fail(err, BP_EUSAGE, "report: --out DIR is required");
    return BP_OK;
}

/* Every RUN is a folder with a metrics log; found before anything is written. */
static bp_status check_runs(const report *r, bp_err *err) {
    for (int i = 0; i < r->n_runs; i++) {
        const char *dir = r->runs[i].dir;
        struct stat st;
        if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
            return bp_fail(err, BP_EUSAGE, "report: run folder %s does not exist", dir);
        char path[BP_PATH_MAX];
        bp_status rc = bp_path_join(path, sizeof path, dir, "metrics.jsonl", err);
        if (rc == BP_OK && !bp_path_exists(path))
            return bp_fail(err, BP_EUSAGE,
                           "report: %s has no metrics.jsonl (not the --out of bagpipe train?)",
                           dir);
        if (rc) return rc;
    }
    return BP_OK;
}

static bool gnuplot_found(void) {
    const char *path = getenv("PATH");
    if (!path) return false;
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        char exe[BP_PATH_MAX];
        if ((size_t)snprintf(exe, sizeof exe, "%.*s/gnuplot", (int)n, n ? p : ".") < sizeof exe &&
            access(exe, X_OK) == 0)
            return true;
        p += n + (p[n] == ':');
    }
    return false;
}

/* A count of the run's configuration (dp, pp, world...): 1 unless a whole number
 * from 1 to 2^30 (the log is input: atoi would overflow, so would their product). */
static long long config_count(const bp_runlog *l, const char *key) {
    const char *s = bp_runlog_config(l, key);
    char *end = NULL;
    long long v = s ? strtoll(s, &end, 10) : 1;
    return s && end != s && *end == '\0' && v >= 1 && v <= 1 << 30 ? v : 1;
}

/* The legend of a run: its folder's name and what sets it apart. */
static void label_run(report_run *run) {
    const char *dir = run->dir, *end = dir + strlen(dir);
    while (end > dir + 1 && end[-1] == '/') end--;
    const char *start = end;
    while (start > dir && start[-1] != '/') start--;
    snprintf(run->name, sizeof run->name, "%.*s", (int)(end - start), start);
    const bp_runlog *l = &run->log;
    const char *model = bp_runlog_config(l, "model"), *algo = bp_runlog_config(l, "dp_algo");
    const char *sched = bp_runlog_config(l, "schedule");
    const char *mb = bp_runlog_config(l, "micro_batches");
    const char *pipes = bp_runlog_config(l, "pipelines");
    const char *net = bp_runlog_config(l, "net");
    long long d = config_count(l, "dp"), p = config_count(l, "pp");
    long long tp = config_count(l, "world") / (d * p);
    char extra[160] = "";
    if (p > 1) snprintf(extra, sizeof extra, ", %s M=%s", sched ? sched : "?", mb ? mb : "?");
    if (config_count(l, "pipelines") > 1)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", %s pipelines", pipes);
    if (net && strcmp(net, "off") != 0)
        snprintf(extra + strlen(extra), sizeof extra - strlen(extra), ", net %s", net);
    snprintf(run->label, sizeof run->label, "%s: %s %.*s, dp %lld x pp %lld x tp %lld%s", run->name,
             model ? model : "?", algo ? (int)strcspn(algo, " ") : 1, algo ? algo : "?", d, p, tp,
             extra);
}

static const char *const plot_ext[] = {"svg", "png"};

static void plot_path(const report *r, const char *name, int i, char *path, size_t n) {
    snprintf(path, n, "%s/%s.%s", r->out, name, plot_ext[i]);
}

static void remove_plots(const report *r, const char *name) {
    char path[BP_PATH_MAX];
    for (int i = 0; i < 2; i++) plot_path(r, name, i, path, sizeof path), unlink(path);
}

/* NAME.svg and NAME.png after gnuplot exited 0, which it does even when it could not
 * write them (a full disk): both whole, or both removed and the report failed. */
static bp_status check_plots(const report *r, const char *name, bp_err *err) {
    char path[BP_PATH_MAX];
    for (int i = 0; i < 2; i++) {
        plot_path(r, name, i, path, sizeof path);
        struct stat st;
        if (stat(path, &st) == 0 && st.st_size > 0) continue;
        remove_plots(r, name);
        return bp_fail(err, BP_EIO, "report: gnuplot left %s empty or missing (a full disk?); no "
                       "plot of %s is kept", path, name);
    }
    return BP_OK;
}

/* gnuplot NAME.gp in the output folder; its messages go to NAME.log. */
static bp_status run_gnuplot(const report *r, const char *name, bp_err *err) {
    char script[96], log[96];
    snprintf(script, sizeof script, "%s.gp", name);
    snprintf(log, sizeof log, "%s.log", name);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) return bp_fail(err, BP_EIO, "report: cannot start gnuplot: %s", strerror(errno));
    if (pid == 0) {
        if (chdir(r->out) != 0 || !freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout))
            _exit(126);
        execlp("gnuplot", "gnuplot", script, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        char path[BP_PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", r->out, log);
        unlink(path);
        return check_plots(r, name, err);
    }
    remove_plots(r, name); /* what a failed run left is no plot */
    return bp_fail(err, BP_EIO, "report: gnuplot failed on %s/%s (its messages: %s/%s)", r->out,
                   script, r->out, log);
}

static bp_status read_runs(report *r, bp_err *err) {
    for (int i = 0; i < r->n_runs; i++) {
        char path[BP_PATH_MAX];
        bp_status rc = bp_path_join(path, sizeof path, r->runs[i].dir, "metrics.jsonl", err);
        if (rc == BP_OK) rc = bp_runlog_read(path, &r->runs[i].log, err);
        if (rc) return bp_err_context(err, "report");
        label_run(&r->runs[i]);
        if ((rc = bp_path_join(path, sizeof path, r->runs[i].dir, "trace.json", err))) return rc;
        if (!bp_path_exists(path)) continue;
        /* A damaged trace, or one that is no file, costs the run its timeline only. */
        bp_err why = {0};
        rc = bp_tracelog_read(path, &r->runs[i].trace, &why);
        if (rc == BP_ENOMEM) {
            *err = why;
            return bp_err_context(err, "report");
        }
        if (rc) bp_log_warn("report: %s; %s is reported without its timeline", why.msg, r->runs[i].dir);
        r->runs[i].has_trace = rc == BP_OK;
    }
    return BP_OK;
}

static bp_status make_plots(report *r, bp_err *err) {
    bp_status rc = report_plot_loss(r, true, err);
    if (rc == BP_OK) rc = report_plot_loss(r, false, err);
    for (int i = 0; rc == BP_OK && i < r->n_runs; i++) {
        rc = report_plot_comm(r, i, err);
        if (rc == BP_OK && r->runs[i].log.n_stages > 0) rc = report_plot_stages(r, i, err);
        if (rc == BP_OK && r->runs[i].has_trace) rc = report_plot_timeline(r, i, err);
    }
    for (int k = 0; rc == BP_OK && k < r->n_plots; k++) rc = run_gnuplot(r, r->plots[k].name, err);
    return rc;
}

static bp_status run_report(report *r, bp_err *err) {
    bp_status rc = check_runs(r, err);
    if (rc) return rc;
    if (!gnuplot_found())
        return bp_fail(err, BP_EIO,
                       "report: gnuplot is not installed (Debian: apt-get install gnuplot-nox)");
    if ((rc = read_runs(r, err))) return rc;
    if ((rc = bp_mkdir_p(r->out, err))) return bp_err_context(err, "option --out");
    if ((rc = make_plots(r, err))) return rc;
    if ((rc = report_index(r, err))) return rc;
    printf("report: %d plots of %d runs in %s/index.html\n", r->n_plots, r->n_runs, r->out);
    return BP_OK;
}

int report_main(int argc, char **argv) {
    report r = {0};
    bp_err err = {0};
    bool help = false;
    r.runs = calloc((size_t)argc + 1, sizeof *r.runs);
    if (!r.runs) return bp_exit_code(bp_fail(&err, BP_ENOMEM, "out of memory"));
    int rc = parse_args(argc, argv, &r, &help, &err);
    if (rc == BP_OK && help) usage(stdout);
    if (rc == BP_OK && !help) rc = run_report(&r, &err);
    if (rc) bp_log_error("%s", err.msg);
    for (int i = 0; i < r.n_runs; i++) {
        bp_runlog_free(&r.runs[i].log);
        bp_tracelog_free(&r.runs[i].trace);
    }
    free(r.runs);
    return bp_exit_code(rc);
}
