/* Whole-file reads and crash-safe writes.
 *
 * Every file bagpipe writes (checkpoints, caches) goes through
 * bp_write_file_atomic: data goes to "<path>.tmp.<pid>", is flushed to disk with
 * fsync, then renamed over <path>, so a reader sees either the old file or the
 * whole new one, never a half-written one. A <path> that exists and is not a
 * regular file (a device, a FIFO) is refused, never replaced. */
#ifndef BP_CORE_FILE_H
#define BP_CORE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bagpipe/status.h"

typedef struct bp_bytes {
    uint8_t *data; /* malloc'ed; free() it */
    size_t n;
} bp_bytes;

/* The whole of a regular file; anything else (a FIFO, a device) is refused. */
bp_status bp_read_file(const char *path, bp_bytes *out, bp_err *err);
/* A regular file opened for reading (a FIFO or a device is refused, never waited on). */
bp_status bp_fopen_regular(const char *path, FILE **f, bp_err *err);
/* BP_OK when path is a regular file that can be opened for reading. */
bp_status bp_check_regular(const char *path, bp_err *err);
bp_status bp_read_stream(FILE *f, bp_bytes *out, bp_err *err);

/* Write the concatenation of n_parts buffers atomically (see above). */
typedef struct bp_iovec {
    const void *data;
    size_t n;
} bp_iovec;
bp_status bp_write_parts_atomic(const char *path, const bp_iovec *parts, int n_parts, bp_err *err);
bp_status bp_write_file_atomic(const char *path, const void *data, size_t n, bp_err *err);
/* Remove the "<path>.tmp.<pid>" files that writers of path killed mid-write (kill -9)
 * left behind: those whose process no longer runs on this machine. The atomic
 * writers above call it before they write. */
void bp_remove_stale_temps(const char *path);

#define BP_PATH_MAX 4096

/* What bagpipe writes as an output file at a path the user names (--trace,
 * --metrics, --measure), and what it may therefore replace there. */
typedef struct bp_output_kind {
    const char *name;  /* "trace", for messages */
    const char *magic; /* how every such file starts */
    bool in_place;     /* opened and written (a log), not renamed over */
} bp_output_kind;

/* Before the work that produces it: may an output of this kind go to path? Yes
 * for a new name, an empty regular file, or a regular file that starts with the
 * kind's magic (one written before), and for a kind renamed into place only in a
 * folder that exists and takes new files; also, when written in place, a FIFO or
 * a device (a log streamed to a pipe). Anything else, '', a directory, another
 * file, a device that a rename would replace, is BP_EUSAGE naming path and why. */
bp_status bp_check_output(const char *path, const bp_output_kind *kind, bp_err *err);

/* Whether two paths name one file; either may not exist yet (then their folders'
 * real paths and last components are compared). */
bool bp_same_path(const char *a, const char *b);

/* out = dir + "/" + name; BP_EUSAGE naming the path when it does not fit. */
bp_status bp_path_join(char *out, size_t n, const char *dir, const char *name, bp_err *err);

/* mkdir -p; existing directories are fine. */
bp_status bp_mkdir_p(const char *path, bp_err *err);

/* True when path exists (file or directory). */
int bp_path_exists(const char *path);

#endif
