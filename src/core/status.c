#include "bagpipe/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

bp_status bp_fail(bp_err *err, bp_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

bp_status bp_err_context(bp_err *err, const char *fmt, ...) {
    if (!err) return BP_EINTERNAL;
    char line[BP_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* Append ": <old message>", cutting it short rather than overflowing. */
    size_t used = n < 0 ? 0 : ((size_t)n < sizeof line ? (size_t)n : sizeof line - 1);
    size_t room = sizeof line - 1 - used;
    size_t old_len = strlen(err->msg);
    const char sep[] = ": ";
    if (room >= 2) {
        memcpy(line + used, sep, 2);
        used += 2;
        room -= 2;
        size_t k = old_len < room ? old_len : room;
        memcpy(line + used, err->msg, k);
        used += k;
    }
    line[used] = '\0';
    memcpy(err->msg, line, used + 1);
    return err->code;
}

void bp_err_clear(bp_err *err) {
    if (!err) return;
    err->code = BP_OK;
    err->msg[0] = '\0';
}

const char *bp_status_name(int status) {
    switch (status) {
    case BP_OK: return "ok";
    case BP_EUSAGE: return "usage error";
    case BP_EIO: return "i/o error";
    case BP_EFORMAT: return "bad file format";
    case BP_ENOMEM: return "out of memory";
    case BP_ENONFINITE: return "non-finite value";
    case BP_ECOMM: return "communication error";
    case BP_ETIMEOUT: return "timeout";
    case BP_EINTERNAL: return "internal error";
    case BP_EINTERRUPTED: return "interrupted";
    default: return "unknown error";
    }
}

int bp_exit_code(int status) {
    if (status == BP_OK) return 0;
    if (status == BP_EINTERRUPTED) return 3;
    return status == BP_EUSAGE ? 2 : 1;
}
