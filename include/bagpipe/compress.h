/* bagpipe codecs: compress flat float buffers for communication.
 *
 * A codec turns n floats into bp_codec_encoded_size(codec, n) bytes and back. It
 * knows nothing of models or of communication; comm.h uses codecs for the
 * low-precision primitives. Encoding rejects NaN and infinity with BP_ENONFINITE
 * and never writes such values to the wire. Messages go into the optional bp_err.
 *
 * Four codecs:
 *
 * MinMaxUInt8 (Bagua's ByteGrad). One encode call is one chunk of any length n:
 *   mn, mx = min and max of the chunk; scale = 255 / (mx - mn + 1e-7);
 *   ub = rint(mx * scale); lb = ub - 255; q[i] = (uint8)(min(rint(x[i] * scale), ub) - lb)
 *   decode: x[i] = (q[i] + lb) / scale
 *   all in float32 arithmetic, rint rounding half to even. Wire format: [mn][mx] as
 *   two float32 in the machine's byte order, then the n bytes q; 8 + n bytes, and
 *   0 bytes for an empty chunk. The error of one round trip is at most
 *   (mx - mn + 1e-7) / 510 per value (plus float rounding). Where float rounding at
 *   large magnitudes (|x * scale| >= 2^24) puts the formula's value outside
 *   [0, 255], where a cast to uint8 is undefined, q is clamped to that range;
 *   chunks whose scaled values overflow float are rejected.
 *
 * MinMax with 4 or 2 bits (the outer gradients of DiLoCo, INTELLECT-1's int8
 *   made narrower): MinMaxUInt8's formula with L = 2^bits - 1 in place of 255
 *   (scale = L / (mx - mn + 1e-7), lb = ub - L, codes clamped to [0, L]). Wire:
 *   [mn][mx], then the codes packed low bits first (code i at bit i * bits);
 *   8 + ceil(n bits / 8) bytes.
 *
 * Top-k with 2-bit values (SparseLoCo's): the k = max(1, ceil(fraction n)) values
 *   of largest magnitude (ties: the lower index), their values MinMax-encoded
 *   with 2 bits; decode puts them back and zeros the rest. Wire: the k indices as
 *   uint32 in increasing order, then the 2-bit encoding of their k values. The
 *   codec keeps scratch memory: one thread encodes at a time.
 *
 * PowerSGD (Vogels et al., rank r, one power iteration, warm-started). Made for a
 * rows x cols matrix G (row-major, n = rows * cols) and stateful:
 *   M = G + E; P = M Q; orthonormalize the columns of P (Gram-Schmidt);
 *   Q = M^T P; E = M - P Q^T. The wire carries [P][Q] as float32
 *   ((rows + cols) * r floats); decode gives P Q^T. Q starts as a Gaussian matrix
 *   from the seed (the same on every rank that uses the same seed) and each call
 *   starts from the Q of the previous one. r is clamped to min(rows, cols). A 1-D
 *   tensor (rows or cols equal to 1) is not compressed: its wire is the n floats.
 *   For data parallelism the same steps run with an average of P and of Q across
 *   ranks in between: bp_powersgd_project, _reproject, _finish below
 *   (comm.h's bp_allreduce_avg_powersgd does exactly that). */
#ifndef BAGPIPE_COMPRESS_H
#define BAGPIPE_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_codec bp_codec;

/* A MinMaxUInt8 codec (stateless: one may serve many threads). */
bp_status bp_codec_minmax_u8_create(bp_codec **out, bp_err *err);

/* MinMax with `bits` (4 or 2) per value. */
bp_status bp_codec_minmax_bits_create(int bits, bp_codec **out, bp_err *err);

/* Top-k of a fraction in (0, 1] of the values, each with 2 bits. */
bp_status bp_codec_topk_create(double fraction, bp_codec **out, bp_err *err);

/* A PowerSGD codec for a rows x cols matrix with rank r >= 1 and the seed of Q. */
bp_status bp_codec_powersgd_create(size_t rows, size_t cols, int rank, uint64_t seed,
                                   bp_codec **out, bp_err *err);

void bp_codec_destroy(bp_codec *codec);

/* "minmax_u8", "minmax_u4", "minmax_u2", "topk_u2" or "powersgd". */
const char *bp_codec_name(const bp_codec *codec);

/* Bytes that encoding n floats produces. */
size_t bp_codec_encoded_size(const bp_codec *codec, size_t n);

/* Encode x[0..n) into out (bp_codec_encoded_size bytes). PowerSGD updates its
 * error-feedback state and Q, and needs n == rows * cols (else BP_EUSAGE). */
bp_status bp_codec_encode(bp_codec *codec, const float *x, size_t n, void *out, bp_err *err);

/* Decode what bp_codec_encode wrote for n floats into x[0..n). */
bp_status bp_codec_decode(const bp_codec *codec, const void *in, size_t n, float *x, bp_err *err);

/* --- PowerSGD state and the steps of its distributed form ---------------------- */

/* Whether the codec is PowerSGD on a 2-D shape (false for 1-D: sent as is). */
bool bp_powersgd_compresses(const bp_codec *codec);

/* The rank actually used (r clamped to min(rows, cols)). */
int bp_powersgd_rank(const bp_codec *codec);

/* The error-feedback matrix E (rows x cols); all zero at the start. */
const float *bp_powersgd_error(const bp_codec *codec);

/* Set E to zero: the next encode compresses its input alone (error feedback off). */
void bp_powersgd_clear_error(bp_codec *codec);

/* The state carried from one encode to the next, for a checkpoint to save and a
 * resume to restore: E (*error_n = rows * cols floats) and the warm-started Q
 * (*q_n = cols * r). False, and nothing set, for a codec that keeps none (1-D, or
 * not PowerSGD). */
bool bp_powersgd_state(bp_codec *codec, float **error, size_t *error_n, float **q, size_t *q_n);

/* Orthonormalize the columns of Q as those of P (Gram-Schmidt), before step 1:
 * PyTorch's PowerSGD hook does it to the first (random) Q and to the previous
 * step's Q before each reuse, and so does Optimus-CC's compressed backpropagation;
 * Vogels' reducer and Optimus-CC's data-parallel reducer reuse Q as it is. */
bp_status bp_powersgd_orthogonalize_q(bp_codec *codec, bp_err *err);

/* Step 1: M = G + E; P = M Q. *p points at P (*p_len = rows * r floats) for the
 * caller to average across ranks in place. */
bp_status bp_powersgd_project(bp_codec *codec, const float *grad, size_t n, float **p,
                              size_t *p_len, bp_err *err);

/* Step 2 (after P was averaged): orthonormalize P; Q = M^T P. *q points at Q
 * (*q_len = cols * r floats) for the caller to average in place. */
bp_status bp_powersgd_reproject(bp_codec *codec, float **q, size_t *q_len, bp_err *err);

/* Step 3 (after Q was averaged): grad = P Q^T; E = M - grad. */
bp_status bp_powersgd_finish(bp_codec *codec, float *grad, size_t n, bp_err *err);

#ifdef __cplusplus
}
#endif
#endif
