#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>

static bp_log_level g_level = BP_LOG_INFO;
static int g_rank = -1;

void bp_log_set_level(bp_log_level level) { g_level = level; }
void bp_log_set_rank(int rank) { g_rank = rank; }

void bp_log(bp_log_level level, const char *fmt, ...) {
    static const char *names[] = {"error", "warning", "info", "debug"};
    if (level > g_level) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One fprintf per line so that lines of different threads do not interleave. */
    if (g_rank >= 0)
        fprintf(stderr, "bagpipe: [rank %d] %s: %s\n", g_rank, names[level], line);
    else
        fprintf(stderr, "bagpipe: %s: %s\n", names[level], line);
}
