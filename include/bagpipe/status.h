/* bagpipe status codes and error context.
 *
 * Every function that can fail returns a bp_status: BP_OK (0) on success, else one
 * of the codes below. Functions that have no context object of their own take a
 * `bp_err *` as their last argument and write a one-line message into it that
 * names what failed (which file, which option, which rank); NULL is allowed when
 * the caller does not want the message. Only the CLI turns a status into an exit
 * code (bp_exit_code), so library code never exits. */
#ifndef BAGPIPE_STATUS_H
#define BAGPIPE_STATUS_H

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bp_status {
    BP_OK = 0,
    BP_EUSAGE,     /* a bad option, argument or combination given by the user */
    BP_EIO,        /* a file could not be opened, read, written or renamed */
    BP_EFORMAT,    /* a file was read but its contents are damaged or of another kind */
    BP_ENOMEM,     /* an allocation failed */
    BP_ENONFINITE, /* a NaN or infinity where a finite value is required */
    BP_ECOMM,      /* the communication layer (MPI) reported a failure */
    BP_ETIMEOUT,   /* an operation did not finish in time */
    BP_EINTERNAL,  /* a broken invariant: a bug in bagpipe */
    BP_EINTERRUPTED, /* stopped on request (a signal) after saving what was done */
} bp_status;

#define BP_ERR_MSG_MAX 512

typedef struct bp_err {
    bp_status code;
    char msg[BP_ERR_MSG_MAX];
} bp_err;

/* Record `code` and a printf-formatted message in err (if err is not NULL) and
 * return code, so that callers can write `return bp_fail(err, BP_EIO, ...)`. */
bp_status bp_fail(bp_err *err, bp_status code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prepend "<context>: " to the message already in err, keeping its code, and return
 * the code. Used while an error travels up, e.g. to add the file or rank name. */
bp_status bp_err_context(bp_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Reset err to BP_OK with an empty message. */
void bp_err_clear(bp_err *err);

/* A short constant name of a status code, e.g. "usage error". */
const char *bp_status_name(int status);

/* The process exit code documented for a status: 0 for BP_OK, 2 for BP_EUSAGE,
 * 3 for BP_EINTERRUPTED (stopped by SIGINT/SIGTERM, checkpoint saved), 1 for every
 * runtime failure. */
int bp_exit_code(int status);

#ifdef __cplusplus
}
#endif
#endif
