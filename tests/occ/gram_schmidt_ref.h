/* The reference rule both CB tests check against: modified Gram-Schmidt on the r
 * columns of a (n x r, row-major), in double precision. */
#ifndef BP_TESTS_OCC_GRAM_SCHMIDT_REF_H
#define BP_TESTS_OCC_GRAM_SCHMIDT_REF_H

#include <math.h>
#include <stddef.h>

static void orthonormalize_ref(double *a, size_t n, size_t r) {
    for (size_t j = 0; j < r; j++) {
        for (size_t k = 0; k < j; k++) {
            double dot = 0;
            for (size_t i = 0; i < n; i++) dot += a[i * r + j] * a[i * r + k];
            for (size_t i = 0; i < n; i++) a[i * r + j] -= dot * a[i * r + k];
        }
        double norm = 0;
        for (size_t i = 0; i < n; i++) norm += a[i * r + j] * a[i * r + j];
        for (size_t i = 0; i < n; i++) a[i * r + j] /= sqrt(norm);
    }
}

#endif
