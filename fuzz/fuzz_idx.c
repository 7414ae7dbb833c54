/* The IDX reader (data/idx.c), through files as bp_idx_load takes them.
 *
 * Input: byte 0 holds flags, then the images file and the labels file separated
 * by BP_FUZZ_SEP. Bit 0 (images) and bit 1 (labels) write that file gzip'ed, so
 * that mutations reach the IDX parser behind a valid gzip stream; without them
 * the raw bytes are read (zlib passes non-gzip data through, and damaged gzip
 * data is an error path of its own). Bits 2-5 give the number of classes - 1. */
#include <stdlib.h>
#include <zlib.h>

#include "data/idx.h"
#include "fuzz.h"

static void write_file(const char *path, const bp_fuzz_part *p, int gzip) {
    if (!gzip) {
        bp_fuzz_write(path, p->data, p->n);
        return;
    }
    gzFile f = gzopen(path, "wb1");
    if (!f || (p->n && gzwrite(f, p->data, (unsigned)p->n) != (int)p->n) || gzclose(f) != Z_OK)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20)) return 0;
    int flags = data[0], n_class = 1 + ((flags >> 2) & 15);
    bp_fuzz_part parts[2];
    bp_fuzz_split(data + 1, size - 1, parts, 2);
    char images[4200], labels[4200];
    bp_fuzz_path(images, sizeof images, "images-idx3-ubyte");
    bp_fuzz_path(labels, sizeof labels, "labels-idx1-ubyte");
    write_file(images, &parts[0], flags & 1);
    write_file(labels, &parts[1], flags & 2);
    bp_images im;
    bp_err err;
    if (bp_fuzz_reject(bp_idx_load(images, labels, n_class, &im, &err), &err)) return 0;
    /* What the data pipeline relies on. */
    size_t pixels = (size_t)im.n * (size_t)im.rows * (size_t)im.cols, sum = 0;
    for (size_t i = 0; i < pixels; i++) sum += im.pixels[i]; /* every pixel is readable */
    if (sum > pixels * 255) abort();
    for (int i = 0; i < im.n; i++)
        if (im.labels[i] < 0 || im.labels[i] >= n_class) abort();
    bp_images_free(&im);
    bp_fuzz_accepted++;
    return 0;
}
