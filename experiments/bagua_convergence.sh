#!/usr/bin/env bash
# Bagua's algorithms against allreduce: the validation loss after 1000 steps of the
# default gpt on 2 ranks, every --dp-algo at its defaults (bench/dp/convergence.sh), with
# the loss curves drawn by bagpipe report. About 15 minutes with 2 cores to itself.
# Environment: BAGPIPE (binary), STEPS (1000), RUNS_DIR (where run folders go).
source "$(dirname "$0")/lib.sh"
study_begin bagua_convergence "Bagua's algorithms: validation loss against allreduce"
STEPS=${STEPS:-1000}
/usr/bin/python3 "$ROOT/bench/dp/convergence.py" --bagpipe "$BP" --steps "$STEPS" \
  --keep "$RUNS" --json "$OUT/convergence.json" | tee "$RUNS/log.txt"
plots plots "$RUNS"/run*
{
  study_header
  cat <<TXT

The default gpt (4 layers, 128 channels, 64 bytes of context) on the KJV text, global
batch 16 on 2 ranks, $STEPS steps, every algorithm at its defaults. The target: the
final validation loss within 5% of allreduce's (decentralized and async: 10%); being
better is never a miss. Validation loss is in nats per byte.
The losses do not depend on the machine's load (every algorithm but async is
deterministic); the ms/step column does, and is only as good as the load below.
MB/step/rank counts bagpipe's wire formats: its MinMaxUInt8 chunk (bytegrad,
lp-decentralized) is an 8-byte header and a byte per value without padding, where
Bagua's aligns header and payload to 32 bytes (24 to 55 bytes more per chunk).

TXT
  sed -n '/^| algorithm/,/^$/p' "$RUNS/log.txt"
  cat <<TXT

Plots (\`bagpipe report\` of every run, [index](plots/index.html)):
[validation loss against time](plots/loss_time.svg) and
[against samples](plots/loss_samples.svg), one line per algorithm.
TXT
} >"$OUT/README.md"
study_end
