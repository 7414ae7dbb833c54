/* The inside of a bp_codec: a table of operations that each codec fills in.
 * A codec's own struct starts with a bp_codec, so a bp_codec * to it can be
 * turned back into the codec's type after checking `ops`. */
#ifndef BP_COMPRESS_CODEC_H
#define BP_COMPRESS_CODEC_H

#include <stddef.h>

#include "bagpipe/compress.h"
#include "core/backend.h"
#include "core/finite.h"

typedef struct bp_codec_ops {
    const char *name;
    size_t (*encoded_size)(const bp_codec *c, size_t n);
    bp_status (*encode)(bp_codec *c, const float *x, size_t n, void *out, bp_err *err);
    bp_status (*decode)(const bp_codec *c, const void *in, size_t n, float *x, bp_err *err);
    void (*destroy)(bp_codec *c);
} bp_codec_ops;

struct bp_codec {
    const bp_codec_ops *ops;
    const bp_backend *be; /* bp_codec_set_backend; NULL: the host's values */
};

/* The backend whose values c codes (comm/ stages them on the host): where it runs
 * the codec's passes itself (bp_backend.codec_pass: an emulated device), MinMaxUInt8
 * and PowerSGD hand it each pass, priced as the cost model prices them (memory-bound
 * passes over the bytes, PowerSGD's products in flops), and write what the pass
 * yields on zeros without computing it; the other codecs compute on the host. */
void bp_codec_set_backend(bp_codec *c, const bp_backend *be);
/* The MinMax codecs' passes, in floats' bytes a value: encoding reads x twice (the
 * range, the codes) and writes the code; decoding reads the code, writes the float. */
#define BP_MINMAX_ENCODE_BYTES (2.25 * sizeof(float))
#define BP_MINMAX_DECODE_BYTES (1.25 * sizeof(float))
/* Whether the pass of `flops` and `bytes` ran on c's device, which leaves the host
 * nothing to compute: then the caller writes the pass's result on zeros. */
bool bp_codec_on_device(const bp_codec *c, double flops, double bytes);

/* Returns BP_ENONFINITE with a message that names the codec and the first NaN or
 * infinity of x[0..n). The caller has already found that there is one; nothing is
 * written to any wire. */
bp_status bp_codec_reject_nonfinite(const char *codec, const float *x, size_t n, bp_err *err);

/* MinMaxUInt8 with its loops in the version for `isa` ("plain", "sse2", "avx2";
 * NULL: the fastest this processor runs); BP_EUSAGE where that version is
 * missing. For tests and benchmarks that compare the versions. */
bp_status bp_codec_minmax_u8_new_isa(const char *isa, bp_codec **out, bp_err *err);
/* The version a MinMaxUInt8 codec runs; NULL for another codec. */
const char *bp_codec_minmax_u8_isa(const bp_codec *c);

#endif
