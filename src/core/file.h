/* Whole-file reads and crash-safe writes.
 *
 * Every file bagpipe writes (checkpoints, caches) goes through
 * bp_write_file_atomic: data goes to "<path>.tmp.<pid>", is flushed to disk with
 * fsync, then renamed over <path>, so a reader sees either the old file or the
 * whole new one, never a half-written one. */
#ifndef BP_CORE_FILE_H
#define BP_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "bagpipe/status.h"

typedef struct bp_bytes {
    uint8_t *data; /* malloc'ed; free() it */
    size_t n;
} bp_bytes;

/* The whole of a regular file; anything else (a FIFO, a device) is refused. */
int bp_read_file(const char *path, bp_bytes *out, bp_err *err);
/* A regular file opened for reading (a FIFO or a device is refused, never waited on). */
int bp_fopen_regular(const char *path, FILE **f, bp_err *err);
/* BP_OK when path is a regular file that can be opened for reading. */
int bp_check_regular(const char *path, bp_err *err);
int bp_read_stream(FILE *f, bp_bytes *out, bp_err *err);

/* Write the concatenation of n_parts buffers atomically (see above). */
typedef struct bp_iovec {
    const void *data;
    size_t n;
} bp_iovec;
int bp_write_parts_atomic(const char *path, const bp_iovec *parts, int n_parts, bp_err *err);
int bp_write_file_atomic(const char *path, const void *data, size_t n, bp_err *err);

#define BP_PATH_MAX 4096

/* out = dir + "/" + name; BP_EUSAGE naming the path when it does not fit. */
int bp_path_join(char *out, size_t n, const char *dir, const char *name, bp_err *err);

/* mkdir -p; existing directories are fine. */
int bp_mkdir_p(const char *path, bp_err *err);

/* True when path exists (file or directory). */
int bp_path_exists(const char *path);

#endif
