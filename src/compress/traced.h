/* Encoding and decoding recorded on a trace (core/trace.h) as "compress" events
 * named "encode" and "decode" with the codec's name; a NULL trace only codes. */
#ifndef BP_COMPRESS_TRACED_H
#define BP_COMPRESS_TRACED_H

#include "bagpipe/compress.h"
#include "core/trace.h"

bp_status bp_codec_encode_traced_(bp_codec *c, const float *x, size_t n, void *out, bp_trace *t,
                                  bp_err *err);
bp_status bp_codec_decode_traced_(const bp_codec *c, const void *in, size_t n, float *x,
                                  bp_trace *t, bp_err *err);

static inline bp_status bp_codec_encode_traced(bp_codec *c, const float *x, size_t n, void *out,
                                               bp_trace *t, bp_err *err) {
    return t ? bp_codec_encode_traced_(c, x, n, out, t, err) : bp_codec_encode(c, x, n, out, err);
}
static inline bp_status bp_codec_decode_traced(const bp_codec *c, const void *in, size_t n,
                                               float *x, bp_trace *t, bp_err *err) {
    return t ? bp_codec_decode_traced_(c, in, n, x, t, err) : bp_codec_decode(c, in, n, x, err);
}

#endif
