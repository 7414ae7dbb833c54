#include "data/idx.h"

#include "core/file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define IDX_IMAGES_MAGIC 0x00000803u /* unsigned bytes, 3 dimensions */
#define IDX_LABELS_MAGIC 0x00000801u /* unsigned bytes, 1 dimension */
/* 1 GiB: 20 times Fashion-MNIST; a header promising more (a gzip bomb inflates a few
 * MB to gigabytes of zeros) is refused before any data is read. */
#define IDX_MAX_PAYLOAD (1ull << 30)

typedef struct idx_file {
    uint32_t dims[3];
    int ndim;
    uint8_t *payload;
    size_t payload_n;
} idx_file;

static uint32_t be32(const uint8_t *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* Read up to n bytes into a buffer that grows as data arrives, so that a header
 * promising gigabytes costs nothing unless the data is really there. */
static bp_status gz_read_upto(gzFile f, const char *path, size_t n, uint8_t **out, size_t *got,
                              bp_err *err) {
    size_t cap = n < (1u << 20) ? n : (1u << 20);
    uint8_t *buf = malloc(cap ? cap : 1);
    *got = 0;
    for (;;) {
        if (buf && *got == cap && cap < n) {
            cap = cap * 2 < n ? cap * 2 : n;
            uint8_t *bigger = realloc(buf, cap);
            if (!bigger) free(buf);
            buf = bigger;
        }
        if (!buf) return bp_fail(err, BP_ENOMEM, "%s: cannot allocate %zu bytes", path, cap);
        if (*got == n) break;
        size_t want = cap - *got > (1u << 30) ? (1u << 30) : cap - *got;
        int r = gzread(f, buf + *got, (unsigned)want);
        if (r < 0) {
            int zerr;
            free(buf);
            return bp_fail(err, BP_EFORMAT, "%s: damaged gzip data: %s", path, gzerror(f, &zerr));
        }
        if (r == 0) break;
        *got += (size_t)r;
    }
    *out = buf;
    return BP_OK;
}

static bp_status read_idx(const char *path, uint32_t magic, idx_file *out, bp_err *err) {
    memset(out, 0, sizeof *out);
    bp_status rc = bp_check_regular(path, err);
    if (rc) return rc;
    gzFile f = gzopen(path, "rb");
    if (!f) return bp_fail(err, BP_EIO, "cannot open %s: %s", path, strerror(errno));
    uint8_t *head = NULL;
    size_t ndim = magic & 0xffu, head_n = 4 + 4 * ndim, got;
    rc = gz_read_upto(f, path, head_n, &head, &got, err);
    if (rc == BP_OK && got < head_n)
        rc = bp_fail(err, BP_EFORMAT, "%s: truncated IDX header (%zu of %zu bytes)", path, got,
                     head_n);
    if (rc == BP_OK && be32(head) != magic)
        rc = bp_fail(err, BP_EFORMAT, "%s: wrong IDX magic 0x%08x (expected 0x%08x)", path,
                     be32(head), magic);
    unsigned long long items = 1;
    for (size_t d = 0; rc == BP_OK && d < ndim; d++) {
        out->dims[d] = be32(head + 4 + 4 * d);
        items *= out->dims[d]; /* each factor < 2^32 and items <= 2^30: no overflow */
        if (out->dims[d] == 0)
            rc = bp_fail(err, BP_EFORMAT, "%s: implausible IDX dimension 0", path);
        else if (items > IDX_MAX_PAYLOAD)
            rc = bp_fail(err, BP_EFORMAT,
                         "%s: the IDX header promises more than the %llu bytes this reader accepts",
                         path, IDX_MAX_PAYLOAD);
    }
    free(head);
    /* Ask for one byte more than the header promises: getting it means trailing data. */
    if (rc == BP_OK) rc = gz_read_upto(f, path, items + 1, &out->payload, &got, err);
    if (rc == BP_OK && got < items)
        rc = bp_fail(err, BP_EFORMAT,
                     "%s: truncated: header promises %llu bytes of data, file has %zu", path,
                     items, got);
    if (rc == BP_OK && got > items)
        rc = bp_fail(err, BP_EFORMAT, "%s: trailing bytes after the %llu bytes of data", path,
                     items);
    gzclose(f);
    if (rc) {
        free(out->payload);
        out->payload = NULL;
        return rc;
    }
    out->ndim = (int)ndim;
    out->payload_n = items;
    return BP_OK;
}

/* The images keep im's payload (bytes, not floats: memory stays what the header
 * promised); labels are copied. */
static bp_status to_images(idx_file *im, const idx_file *lb, const char *labels_path, int n_class,
                           bp_images *out, bp_err *err) {
    if (im->dims[0] != lb->dims[0])
        return bp_fail(err, BP_EFORMAT, "%s: %u labels for %u images", labels_path, lb->dims[0],
                       im->dims[0]);
    for (uint32_t i = 0; i < lb->dims[0]; i++)
        if (lb->payload[i] >= n_class)
            return bp_fail(err, BP_EFORMAT, "%s: label %u of item %u is not below %d", labels_path,
                           lb->payload[i], i, n_class);
    out->n = (int)im->dims[0];
    out->rows = (int)im->dims[1];
    out->cols = (int)im->dims[2];
    out->labels = malloc((size_t)out->n * sizeof(int32_t));
    if (!out->labels) {
        bp_images_free(out);
        return bp_fail(err, BP_ENOMEM, "cannot allocate %zu labels", (size_t)im->dims[0]);
    }
    out->pixels = im->payload;
    im->payload = NULL;
    for (int i = 0; i < out->n; i++) out->labels[i] = lb->payload[i];
    return BP_OK;
}

bp_status bp_idx_load(const char *images_path, const char *labels_path, int n_class, bp_images *out,
                      bp_err *err) {
    memset(out, 0, sizeof *out);
    idx_file im, lb;
    bp_status rc = read_idx(images_path, IDX_IMAGES_MAGIC, &im, err);
    if (rc) return rc;
    rc = read_idx(labels_path, IDX_LABELS_MAGIC, &lb, err);
    if (rc == BP_OK) rc = to_images(&im, &lb, labels_path, n_class, out, err);
    free(im.payload);
    free(lb.payload);
    return rc;
}

bp_status bp_fashion_load(const char *dir, int train, bp_images *out, bp_err *err) {
    const char *prefix = train ? "train" : "t10k";
    char images[BP_PATH_MAX], labels[BP_PATH_MAX], name[64];
    snprintf(name, sizeof name, "%s-images-idx3-ubyte.gz", prefix);
    bp_status rc = bp_path_join(images, sizeof images, dir, name, err);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte.gz", prefix);
    if (rc == BP_OK) rc = bp_path_join(labels, sizeof labels, dir, name, err);
    return rc ? rc : bp_idx_load(images, labels, 10, out, err);
}

void bp_images_free(bp_images *im) {
    free(im->pixels);
    free(im->labels);
    memset(im, 0, sizeof *im);
}
