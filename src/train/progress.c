#include "train/progress.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether stdout reaches a terminal. Open MPI gives every rank a pseudo-terminal
 * whatever mpirun's own output is (a log file on any cluster), and MPICH's Hydra
 * gives every rank (PMI_RANK set) a pipe to its proxy, which forwards the bytes to
 * mpiexec's output, whatever that is. So under either the answer is the launcher's:
 * scripts/mpirun.sh passes BAGPIPE_TERMINAL=1 when its output is a terminal;
 * without that a rank of Open MPI prints plain lines, as does one of MPICH. */
static bool on_terminal(void) {
    const char *said = getenv("BAGPIPE_TERMINAL");
    struct stat st;
    if (said && getenv("PMI_RANK") && fstat(STDOUT_FILENO, &st) == 0 && S_ISFIFO(st.st_mode))
        return strcmp(said, "1") == 0;
    if (!isatty(STDOUT_FILENO)) return false;
    if (said) return strcmp(said, "1") == 0;
    return getenv("OMPI_COMM_WORLD_SIZE") == NULL;
}

void bp_progress_init(bp_progress *p, int mode, int64_t total, const char *unit) {
    if (mode == BP_PROGRESS_AUTO) mode = on_terminal() ? BP_PROGRESS_BAR : BP_PROGRESS_LINES;
    *p = (bp_progress){.mode = mode, .total = total, .unit = unit};
}

static void format_eta(double s, char *buf, size_t n) {
    long t = s > 0 && s < 1e8 ? (long)(s + 0.5) : 0;
    if (t >= 3600)
        snprintf(buf, n, "%ldh%02ldm", t / 3600, t / 60 % 60);
    else
        snprintf(buf, n, "%ldm%02lds", t / 60, t % 60);
}

static void format_rate(double r, char *buf, size_t n) {
    if (r >= 1e6)
        snprintf(buf, n, "%.2fM", r / 1e6);
    else if (r >= 1e3)
        snprintf(buf, n, "%.1fk", r / 1e3);
    else
        snprintf(buf, n, "%.0f", r);
}

void bp_progress_step(bp_progress *p, int64_t step, double loss, double items_per_s,
                      double mb_sent, double eta_s) {
    char eta[32], rate[32], sent[32] = "";
    format_eta(eta_s, eta, sizeof eta);
    format_rate(items_per_s, rate, sizeof rate);
    if (mb_sent > 0) snprintf(sent, sizeof sent, "  %.2f MB/step", mb_sent);
    if (p->mode == BP_PROGRESS_BAR) {
        enum { WIDTH = 24 };
        char bar[WIDTH + 1];
        int filled = (int)(WIDTH * step / (p->total > 0 ? p->total : 1));
        for (int i = 0; i < WIDTH; i++) bar[i] = i < filled ? '#' : '.';
        bar[WIDTH] = '\0';
        printf("\r[%s] step %lld/%lld  loss %.4f  %s %s/s%s  ETA %s   ", bar, (long long)step,
               (long long)p->total, loss, rate, p->unit, sent, eta);
        fflush(stdout);
        p->drawn = 1;
    } else if (p->mode == BP_PROGRESS_LINES) {
        printf("step %lld/%lld  loss %.4f  %s %s/s%s  ETA %s\n", (long long)step,
               (long long)p->total, loss, rate, p->unit, sent, eta);
        fflush(stdout);
    }
}

void bp_progress_note(bp_progress *p, const char *fmt, ...) {
    if (p->mode == BP_PROGRESS_NONE) return;
    if (p->drawn) putchar('\n');
    p->drawn = 0;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

void bp_progress_finish(bp_progress *p) {
    if (p->drawn) putchar('\n');
    p->drawn = 0;
    fflush(stdout);
}
