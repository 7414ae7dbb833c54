/* A text corpus as bytes, for byte-level language modelling.
 *
 * The corpus is any file (bytes are bytes; an empty file is an error), or the
 * name "kjv": the King James Bible printed by Debian's `bible` command (package
 * bible-kjv), produced once and cached as a file. The first 90% of the bytes are
 * the training split, the rest the validation split. */
#ifndef BP_DATA_TEXT_H
#define BP_DATA_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "core/rng.h"

typedef struct bp_text {
    uint8_t *bytes;
    size_t n;       /* total bytes */
    size_t n_train; /* bytes [0, n_train) train, [n_train, n) validation */
} bp_text;

/* Load `spec` ("kjv" or a path). For "kjv", cache_dir holds kjv.txt; it is
 * created from `bible` when missing (written to a temporary file, then renamed,
 * so an interrupted run never leaves a half-written cache). */
bp_status bp_text_load(const char *spec, const char *cache_dir, bp_text *out, bp_err *err);
void bp_text_free(bp_text *t);

/* Both splits must hold at least one window of T+1 bytes. */
bp_status bp_text_check_seq_len(const bp_text *t, const char *spec, int T, bp_err *err);

/* One training batch: draws B_global window starts uniformly from the train split
 * with rng (every rank draws all of them, so every rank's rng stays in step) and
 * writes rows [rank*B/world, (rank+1)*B/world) as tokens [B/world, T] and targets
 * (the next byte of each position). B_global % world must be 0. */
void bp_text_train_batch(const bp_text *t, bp_rng *rng, int B_global, int T, int rank, int world,
                         int32_t *tokens, int32_t *targets);

/* Validation window i of n_windows: fixed starts evenly spaced over the split,
 * start_i = floor(i * (n_val - T - 1) / (n_windows - 1)). Writes one row. */
void bp_text_val_window(const bp_text *t, int i, int n_windows, int T, int32_t *tokens,
                        int32_t *targets);

#endif
