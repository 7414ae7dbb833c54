/* Shared pieces of the fuzz harnesses (fuzz/README.md).
 *
 * Every harness defines LLVMFuzzerTestOneInput. Built with clang and
 * -fsanitize=fuzzer it is a libFuzzer target; linked with driver.c (any compiler)
 * it is a program that runs the same entry point on files, which is how
 * tests/fuzz replays the corpus in every build. */
#ifndef BP_FUZZ_FUZZ_H
#define BP_FUZZ_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs that went through every stage of a harness without being rejected.
 * The replay driver reports it, and a corpus whose seeds are all rejected (a
 * format changed under it) fails its test. */
extern long bp_fuzz_accepted;

/* Separator between the parts of a multi-file input, e.g. the files of a
 * checkpoint. It never occurs in UTF-8 text and is unlikely in binary data. */
#define BP_FUZZ_SEP "\xff\xfe" "BP-PART" "\xfe\xff"
#define BP_FUZZ_SEP_LEN 11

typedef struct bp_fuzz_part {
    const uint8_t *data;
    size_t n;
} bp_fuzz_part;

/* Split data at BP_FUZZ_SEP into up to max parts; the last part takes the rest
 * (separators included). Missing parts are empty (n 0, data not NULL). Returns
 * the number found. */
int bp_fuzz_split(const uint8_t *data, size_t size, bp_fuzz_part *parts, int max);

/* A private directory for the files a harness writes (made once per process in
 * $TMPDIR, else /dev/shm, else /tmp, and removed at exit), and a path inside it. */
const char *bp_fuzz_dir(void);
void bp_fuzz_path(char *buf, size_t n, const char *name);

/* Write (or, with data == NULL, remove) a file; aborts on I/O errors, which are
 * the harness's fault and not the input's. */
void bp_fuzz_write(const char *path, const void *data, size_t n);

/* With BP_FUZZ_VERBOSE=1 in the environment, print why an input was rejected
 * (the error line); silent otherwise. Returns rc. */
struct bp_err;
int bp_fuzz_reject(int rc, const struct bp_err *err);

#endif
