#include "data/text.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/file.h"

/* The whole Bible, as `bible` prints it: book and chapter headings, numbered verses. */
#define KJV_COMMAND "bible \"Gen1:1-Rev22:21\" 2>/dev/null"

static bp_status build_kjv_cache(const char *path, bp_err *err) {
    FILE *p = popen(KJV_COMMAND, "r");
    if (!p) return bp_fail(err, BP_EIO, "data kjv: cannot run `bible`: %s", strerror(errno));
    bp_bytes text = {0};
    bp_status rc = bp_read_stream(p, &text, err);
    int status = pclose(p);
    if (rc == BP_OK && (status != 0 || text.n == 0))
        rc = bp_fail(err, BP_EIO,
                     "data kjv: the `bible` command failed or printed nothing; install the "
                     "Debian package bible-kjv");
    if (rc == BP_OK) rc = bp_write_file_atomic(path, text.data, text.n, err);
    free(text.data);
    return rc;
}

bp_status bp_text_load(const char *spec, const char *cache_dir, bp_text *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    char path[BP_PATH_MAX];
    if (strcmp(spec, "kjv") == 0) {
        bp_status rc = bp_mkdir_p(cache_dir, err);
        if (rc == BP_OK) rc = bp_path_join(path, sizeof path, cache_dir, "kjv.txt", err);
        if (rc) return rc;
        if (!bp_path_exists(path) && (rc = build_kjv_cache(path, err)) != BP_OK) return rc;
    } else {
        if (strlen(spec) >= sizeof path) return bp_fail(err, BP_EUSAGE, "path too long: %s", spec);
        memcpy(path, spec, strlen(spec) + 1);
    }
    bp_bytes b = {0};
    bp_status rc = bp_read_file(path, &b, err);
    if (rc) return rc;
    if (b.n == 0) {
        free(b.data);
        return bp_fail(err, BP_EFORMAT, "data %s: file is empty", path);
    }
    out->bytes = b.data;
    out->n = b.n;
    out->n_train = b.n / 10 * 9 + (b.n % 10) * 9 / 10; /* floor(0.9 n) without overflow */
    return BP_OK;
}

void bp_text_free(bp_text *t) {
    free(t->bytes);
    memset(t, 0, sizeof *t);
}

bp_status bp_text_check_seq_len(const bp_text *t, const char *spec, int T, bp_err *err) {
    size_t need = (size_t)T + 1;
    if (t->n_train < need || t->n - t->n_train < need)
        return bp_fail(err, BP_EFORMAT,
                       "data %s: %zu bytes is too short for --seq-len %d (each of the 90%%/10%% "
                       "train/validation splits needs at least %zu bytes)",
                       spec, t->n, T, need);
    return BP_OK;
}

static void window(const uint8_t *src, int T, int32_t *tokens, int32_t *targets) {
    for (int j = 0; j < T; j++) {
        tokens[j] = src[j];
        targets[j] = src[j + 1];
    }
}

void bp_text_train_batch(const bp_text *t, bp_rng *rng, int B_global, int T, int rank, int world,
                         int32_t *tokens, int32_t *targets) {
    int per_rank = B_global / world;
    uint64_t n_starts = t->n_train - (size_t)T; /* starts 0 .. n_train-T-1 */
    for (int b = 0; b < B_global; b++) {
        uint64_t start = bp_rng_below(rng, n_starts);
        int row = b - rank * per_rank;
        if (row < 0 || row >= per_rank) continue;
        window(t->bytes + start, T, tokens + (size_t)row * T, targets + (size_t)row * T);
    }
}

void bp_text_val_window(const bp_text *t, int i, int n_windows, int T, int32_t *tokens,
                        int32_t *targets) {
    uint64_t span = t->n - t->n_train - (uint64_t)T - 1;
    uint64_t start = n_windows > 1 ? (uint64_t)i * span / (uint64_t)(n_windows - 1) : 0;
    window(t->bytes + t->n_train + start, T, tokens, targets);
}
