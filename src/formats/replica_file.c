/* A rank's replica file in a checkpoint (checkpoint.h): the named buffers of a
 * bp_state_list, as
 *   "BPREPLC1", u32 version 1, i64 step, u32 count,
 *   per buffer: u32 name length, the name, u64 floats, the floats,
 *   u32 CRC-32 of everything before it
 * in the byte order of the machine (as the .state files). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "formats/checkpoint.h"

#define REPLICA_MAGIC "BPREPLC1"

bp_status bp_checkpoint_replica_name(int stage, int tp, int d, char *buf, size_t n) {
    int k = snprintf(buf, n, "stage%d-tp%d-dp%d.replica", stage, tp, d);
    return k > 0 && (size_t)k < n ? BP_OK : BP_EINTERNAL;
}

int bp_checkpoint_replica_index(int stage, int tp, int d, int tps, int dps) {
    return (stage * tps + tp) * dps + d;
}

static bp_status replica_path(const char *ckpt_dir, int stage, int tp, int d, char *name, size_t n,
                              char *path, bp_err *err) {
    bp_checkpoint_replica_name(stage, tp, d, name, n);
    return bp_path_join(path, BP_PATH_MAX, ckpt_dir, name, err);
}

/* Written as parts: the header, per buffer its head (name and size) and its
 * floats, the CRC. */
bp_status bp_checkpoint_write_replica(const char *ckpt_dir, int stage, int tp, int d,
                                      int64_t step, const bp_state_list *l, uint32_t *crc_out,
                                      bp_err *err) {
    char name[96], path[BP_PATH_MAX];
    bp_status rc = replica_path(ckpt_dir, stage, tp, d, name, sizeof name, path, err);
    if (rc) return rc;
    uint8_t header[24];
    uint32_t version = 1, count = (uint32_t)l->n;
    memcpy(header, REPLICA_MAGIC, 8);
    memcpy(header + 8, &version, 4);
    memcpy(header + 12, &step, 8);
    memcpy(header + 20, &count, 4);
    int n_parts = 2 + 2 * l->n;
    bp_iovec *parts = malloc((size_t)n_parts * sizeof *parts);
    uint8_t *heads = malloc((size_t)(l->n ? l->n : 1) * (4 + BP_STATE_NAME_MAX + 8));
    if (!parts || !heads) {
        free(parts), free(heads);
        return bp_fail(err, BP_ENOMEM, "out of memory");
    }
    parts[0] = (bp_iovec){header, sizeof header};
    uLong crc = crc32_z(0, header, sizeof header);
    uint8_t *h = heads;
    for (int i = 0; i < l->n; i++) {
        const bp_state_buf *b = &l->bufs[i];
        uint32_t len = (uint32_t)strlen(b->name);
        uint64_t n = b->n;
        uint8_t *start = h;
        memcpy(h, &len, 4), h += 4;
        memcpy(h, b->name, len), h += len;
        memcpy(h, &n, 8), h += 8;
        parts[1 + 2 * i] = (bp_iovec){start, (size_t)(h - start)};
        parts[2 + 2 * i] = (bp_iovec){b->data, b->n * sizeof(float)};
        crc = crc32_z(crc, start, (size_t)(h - start));
        crc = crc32_z(crc, (const Bytef *)b->data, b->n * sizeof(float));
    }
    uint32_t crc32v = (uint32_t)crc;
    *crc_out = crc32v;
    parts[1 + 2 * l->n] = (bp_iovec){&crc32v, 4};
    rc = bp_write_parts_atomic(path, parts, n_parts, err);
    free(parts);
    free(heads);
    return rc;
}

void bp_checkpoint_discard_replica(const char *ckpt_dir, int stage, int tp, int d) {
    char name[96], path[BP_PATH_MAX];
    if (replica_path(ckpt_dir, stage, tp, d, name, sizeof name, path, NULL) == BP_OK) unlink(path);
    rmdir(ckpt_dir); /* fails while other files are there: the last one removes it */
}

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static int take(reader *r, void *out, size_t n) {
    if (n > r->n - r->at) return -1;
    if (out) memcpy(out, r->p + r->at, n);
    r->at += n;
    return 0;
}

/* Buffer i of the file at r against l's: the same name and size; then its floats. */
static bp_status read_buffer(reader *r, const bp_state_buf *want, const char *file, bp_err *err) {
    uint32_t len = 0;
    uint64_t n = 0;
    char name[BP_STATE_NAME_MAX] = "";
    if (take(r, &len, 4) || len >= sizeof name || take(r, name, len) || take(r, &n, 8))
        return bp_fail(err, BP_EFORMAT, "%s has an unknown layout", file);
    if (strcmp(name, want->name) != 0 || n != want->n)
        return bp_fail(err, BP_EFORMAT,
                       "%s holds %s of %llu floats where this run keeps %s of %zu (a file of "
                       "another configuration)",
                       file, name, (unsigned long long)n, want->name, want->n);
    if (n > (r->n - r->at) / sizeof(float) || take(r, want->data, n * sizeof(float)))
        return bp_fail(err, BP_EFORMAT, "%s is too short for its buffer %s", file, name);
    return BP_OK;
}

/* Whether the file whose CRC is `stored` is the one the manifest lists at `own`
 * (crcs NULL: it lists none); else which rank's it is, or that it is of none. */
static bp_status check_owner(const bp_manifest *mf, const uint32_t *crcs, int own, uint32_t stored,
                             const char *file, bp_err *err) {
    if (!crcs || crcs[own] == stored) return BP_OK;
    for (int s = 0; s < mf->pp; s++)
        for (int t = 0; t < mf->tp; t++)
            for (int d = 0; d < mf->dp; d++) {
                if (crcs[bp_checkpoint_replica_index(s, t, d, mf->tp, mf->dp)] != stored) continue;
                char other[96];
                bp_checkpoint_replica_name(s, t, d, other, sizeof other);
                return bp_fail(err, BP_EFORMAT,
                               "%s holds what the manifest lists as %s (files swapped or "
                               "copied): the run would not continue exactly",
                               file, other);
            }
    return bp_fail(err, BP_EFORMAT,
                   "%s is not the file this checkpoint wrote (its checksum %08x is not the "
                   "manifest's %08x: a file of another run?)",
                   file, (unsigned)stored, (unsigned)crcs[own]);
}

static bp_status parse(const bp_bytes *f, int64_t step, const bp_state_list *l, const char *file,
                       bp_err *err) {
    uint32_t stored, version = 0, count = 0;
    int64_t at_step = -1;
    memcpy(&stored, f->data + f->n - 4, 4);
    if ((uint32_t)crc32_z(0, f->data, f->n - 4) != stored)
        return bp_fail(err, BP_EFORMAT, "%s is damaged (checksum mismatch)", file);
    reader r = {f->data, f->n - 4, 8};
    if (take(&r, &version, 4) || take(&r, &at_step, 8) || take(&r, &count, 4) || version != 1)
        return bp_fail(err, BP_EFORMAT, "%s has an unknown layout", file);
    if (at_step != step)
        return bp_fail(err, BP_EFORMAT, "%s is of step %lld, the manifest of step %lld", file,
                       (long long)at_step, (long long)step);
    if (count != (uint32_t)l->n)
        return bp_fail(err, BP_EFORMAT,
                       "%s holds %u buffers where this run keeps %d (a file of another "
                       "configuration)",
                       file, count, l->n);
    bp_status rc = BP_OK;
    for (int i = 0; rc == BP_OK && i < l->n; i++) rc = read_buffer(&r, &l->bufs[i], file, err);
    if (rc == BP_OK && r.at != r.n)
        rc = bp_fail(err, BP_EFORMAT, "%s has %zu bytes after its last buffer", file, r.n - r.at);
    return rc;
}

bp_status bp_checkpoint_read_replica(const char *ckpt_dir, const bp_manifest *mf, int stage,
                                     int tp, int d, const uint32_t *crcs, const bp_state_list *l,
                                     bp_err *err) {
    char name[96], path[BP_PATH_MAX];
    bp_bytes f = {0};
    bp_status rc = replica_path(ckpt_dir, stage, tp, d, name, sizeof name, path, err);
    if (rc == BP_OK) rc = bp_read_file(path, &f, err);
    if (rc == BP_OK && (f.n < 28 || memcmp(f.data, REPLICA_MAGIC, 8) != 0))
        rc = bp_fail(err, BP_EFORMAT, "%s is not a bagpipe replica file", name);
    uint32_t stored = 0;
    if (rc == BP_OK) memcpy(&stored, f.data + f.n - 4, 4);
    if (rc == BP_OK)
        rc = check_owner(mf, crcs, bp_checkpoint_replica_index(stage, tp, d, mf->tp, mf->dp), stored,
                         name, err);
    if (rc == BP_OK) rc = parse(&f, mf->step, l, name, err);
    free(f.data);
    return rc;
}
