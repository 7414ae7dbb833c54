/* Labelled images from IDX files (the MNIST / Fashion-MNIST format), gzip'ed or not.
 *
 * Headers are validated in full: magic (0x00000803 for images, 0x00000801 for
 * labels), dimensions, exact payload length (a truncated file and trailing bytes
 * are both errors), matching image and label counts, labels below n_class. */
#ifndef BP_DATA_IDX_H
#define BP_DATA_IDX_H

#include <stdint.h>

#include "bagpipe/status.h"

typedef struct bp_images {
    int n;          /* number of images */
    int rows, cols; /* pixels per image = rows * cols */
    uint8_t *pixels; /* [n, rows*cols], as in the file (0..255; the task scales them) */
    int32_t *labels; /* [n] */
} bp_images;

bp_status bp_idx_load(const char *images_path, const char *labels_path, int n_class, bp_images *out,
                      bp_err *err);

/* The Fashion-MNIST split `train` (60000) or test (10000) from a directory holding
 * the four files of Debian's dataset-fashion-mnist (…-idx3-ubyte.gz). */
bp_status bp_fashion_load(const char *dir, int train, bp_images *out, bp_err *err);

void bp_images_free(bp_images *im);

#endif
