#include "train/progress.h"

#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

void bp_progress_init(bp_progress *p, int mode, int64_t total, const char *unit) {
    if (mode == BP_PROGRESS_AUTO) mode = isatty(STDOUT_FILENO) ? BP_PROGRESS_BAR : BP_PROGRESS_LINES;
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
