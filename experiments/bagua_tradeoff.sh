#!/usr/bin/env bash
# The Bagua paper's trade-off in miniature: the training time each algorithm needs to
# reach a validation loss, on four emulated networks (bench/dp/tradeoff.sh --quick),
# with loss-against-time plots per network. About 10 minutes with 2 cores to itself.
# Environment: BAGPIPE (binary), RUNS_DIR (where run folders go).
source "$(dirname "$0")/lib.sh"
study_begin bagua_tradeoff "Bagua's trade-off: time to a validation loss per algorithm and network"
/usr/bin/python3 "$ROOT/bench/dp/tradeoff.py" --bagpipe "$BP" --quick --keep "$RUNS" \
  --json "$OUT/tradeoff.json" | tee "$RUNS/log.txt"
declare -A NET=([none]=off [1gbit_0.1ms]=bw=1Gbit,lat=0.1ms [100mbit_0.1ms]=bw=100Mbit,lat=0.1ms
  [1gbit_5ms]=bw=1Gbit,lat=5ms)
for name in "${!NET[@]}"; do
  mapfile -t runs < <(runs_with net "${NET[$name]}" "$RUNS"/run*)
  [ ${#runs[@]} -gt 0 ] && plots "plots_$name" "${runs[@]}"
  # the bytes per step are the same on every network: drawn once, where they cost most
  [ "$name" = 100mbit_0.1ms ] || rm -f "$OUT/plots_$name"/{comm_run*,index.html}
done
{
  study_header
  cat <<'TXT'

The default gpt on 2 ranks (global batch 16), each algorithm at its defaults, on four
networks emulated by comm/ (bandwidth per link and latency per message: none, 1 Gbit /
0.1 ms, 100 Mbit / 0.1 ms, 1 Gbit / 5 ms). Each run stops at the first evaluation (every
10 steps) whose validation loss is at most 2.60 nats per byte; the time is the sum of the
step times up to it (evaluation excluded). Bagua's claim in this shape: low precision
wins where bandwidth is scarce, decentralized where latency is high.

TXT
  sed -n '/^time to val loss/,$p' "$RUNS/log.txt"
  cat <<'TXT'

Loss against training time, one line per algorithm, per network:
[none](plots_none/loss_time.svg), [1 Gbit / 0.1 ms](plots_1gbit_0.1ms/loss_time.svg),
[100 Mbit / 0.1 ms](plots_100mbit_0.1ms/loss_time.svg), [1 Gbit / 5 ms](plots_1gbit_5ms/loss_time.svg);
bytes and exposed communication per step of each algorithm at 100 Mbit in
plots_100mbit_0.1ms/comm_run*.svg (runs in the table's order). The bytes are bagpipe's
wire formats: its MinMaxUInt8 chunk (bytegrad, lp-decentralized) is an 8-byte header and
a byte per value without padding, where Bagua's aligns header and payload to 32 bytes
(24 to 55 bytes more per chunk).
TXT
} >"$OUT/README.md"
study_end
