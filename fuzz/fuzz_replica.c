/* Reading a rank's replica file of a checkpoint (formats/replica_file.c) the way a
 * resume does: into a state list of two buffers, "replica0.weights" of 4 floats
 * and "elastic_center" of 2, at step 1.
 *
 * Input: byte 0 holds flags, then the file. Bit 0 recomputes its CRC-32 (the last
 * 4 bytes) after mutation, so that the parser behind the checksum sees the mutated
 * bytes; without it nearly every mutation stops at the checksum, which is tested
 * too. An accepted file must have filled both buffers with its floats, which sit
 * at fixed offsets once its names and sizes matched (bytes 52 and 94). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "fuzz.h"
#include "core/file.h"
#include "formats/checkpoint.h"

#define DIR_NAME "ckpt-00000001"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20)) return 0;
    size_t n = size - 1;
    uint8_t *file = malloc(n + 1);
    if (!file) abort();
    memcpy(file, data + 1, n);
    if ((data[0] & 1) && n >= 4) {
        uint32_t crc = (uint32_t)crc32_z(0, file, n - 4);
        memcpy(file + n - 4, &crc, 4);
    }
    char dir[4200], path[4300];
    bp_fuzz_path(dir, sizeof dir, DIR_NAME);
    bp_err err;
    if (bp_mkdir_p(dir, &err)) abort();
    snprintf(path, sizeof path, "%s/stage0-tp0-dp0.replica", dir);
    bp_fuzz_write(path, file, n);
    float w[4] = {0}, c[2] = {0};
    bp_state_list l = {0};
    if (bp_state_add(&l, w, 4, &err, "replica0.weights") ||
        bp_state_add(&l, c, 2, &err, "elastic_center"))
        abort();
    bp_manifest mf = {.step = 1, .dp = 1, .pp = 1, .tp = 1};
    int rc = bp_checkpoint_read_replica(dir, &mf, 0, 0, 0, NULL, &l, &err);
    bp_state_list_free(&l);
    if (bp_fuzz_reject(rc, &err)) {
        free(file);
        return 0;
    }
    if (n < 102 || memcmp(w, file + 52, sizeof w) != 0 || memcmp(c, file + 94, sizeof c) != 0)
        abort();
    free(file);
    bp_fuzz_accepted++;
    return 0;
}
