#include "compress/traced.h"

static void record(bp_trace *t, const char *name, const bp_codec *c, double t0) {
    bp_trace_args a = BP_TRACE_NO_ARGS;
    a.codec = bp_codec_name(c);
    bp_trace_add(t, "compress", name, t0, &a);
}

bp_status bp_codec_encode_traced_(bp_codec *c, const float *x, size_t n, void *out, bp_trace *t,
                                  bp_err *err) {
    double t0 = bp_now();
    bp_status rc = bp_codec_encode(c, x, n, out, err);
    record(t, "encode", c, t0);
    return rc;
}

bp_status bp_codec_decode_traced_(const bp_codec *c, const void *in, size_t n, float *x,
                                  bp_trace *t, bp_err *err) {
    double t0 = bp_now();
    bp_status rc = bp_codec_decode(c, in, n, x, err);
    record(t, "decode", c, t0);
    return rc;
}
