#include "compress/codec.h"

#include <math.h>

const char *bp_codec_name(const bp_codec *codec) { return codec->ops->name; }

size_t bp_codec_encoded_size(const bp_codec *codec, size_t n) {
    return codec->ops->encoded_size(codec, n);
}

bp_status bp_codec_encode(bp_codec *codec, const float *x, size_t n, void *out, bp_err *err) {
    return codec->ops->encode(codec, x, n, out, err);
}

bp_status bp_codec_decode(const bp_codec *codec, const void *in, size_t n, float *x, bp_err *err) {
    return codec->ops->decode(codec, in, n, x, err);
}

void bp_codec_set_backend(bp_codec *c, const bp_backend *be) { c->be = be; }

bool bp_codec_on_device(const bp_codec *c, double flops, double bytes) {
    if (!c->be || !c->be->codec_pass) return false;
    c->be->codec_pass(c->be, flops, bytes);
    return true;
}

void bp_codec_destroy(bp_codec *codec) {
    if (codec) codec->ops->destroy(codec);
}

bp_status bp_codec_reject_nonfinite(const char *codec, const float *x, size_t n, bp_err *err) {
    size_t i = 0;
    while (i < n && isfinite(x[i])) i++;
    return bp_fail(err, BP_ENONFINITE, "%s: input value %zu of %zu is %s; not encoded", codec, i, n,
                   i < n && isnan(x[i]) ? "NaN" : "infinite");
}
