#!/usr/bin/env bash
# AvgPipe against gpipe and 1f1b on 2 stages at the same batch per pipeline, on two
# emulated networks: samples per second and training time to the loss 1f1b reaches at
# half its steps (bench/pipe/avgpipe_own.sh), the simulator's prediction for deeper
# pipelines, and a short traced run of each configuration whose pipeline timeline
# bagpipe report draws. About 6 minutes with 2 cores to itself.
# Environment: BAGPIPE (binary), RUNS_DIR, STEPS (80).
source "$(dirname "$0")/lib.sh"
study_begin avgpipe "AvgPipe against gpipe and 1f1b"
OUT="$RUNS/own" BAGPIPE=$BP "$ROOT/bench/pipe/avgpipe_own.sh" | tee "$RUNS/log.txt"

# The timelines: 12 steps of each configuration at 1 Gbit / 1 ms, traced.
CONFIGS=(
  "gpipe|--schedule gpipe"
  "1f1b|--schedule 1f1b"
  "avgpipe2|--schedule 1f1b --pipelines 2 --avgpipe-flush step"
  "avgpipe2nf|--schedule 1f1b --pipelines 2 --avgpipe-flush average"
  "avgpipe2afp4|--schedule afp:4 --pipelines 2 --avgpipe-flush average"
)
for c in "${CONFIGS[@]}"; do
  name=${c%%|*}
  read -ra flags <<<"${c#*|}"
  "$ROOT/scripts/mpirun.sh" -n 2 "$BP" train --batch 16 --micro-batches 4 --pp 2 --steps 12 \
    --eval-every 0 --progress none --net bw=1Gbit,lat=1ms "${flags[@]}" \
    --trace "$RUNS/trace_$name/trace.json" --out "$RUNS/trace_$name" >/dev/null
done
plots timelines "$RUNS"/trace_*
{
  study_header
  cat <<'TXT'

The default gpt on 2 stages (2 ranks), batch 16 per pipeline in 4 micro-batches; AvgPipe
with 2 pipelines, each training on its own batch (a step consumes 2 batches) and averaged
elastically every 4 steps: avgpipe2 flushes the pipeline every step, avgpipe2nf only
where the replicas meet (`--avgpipe-flush average`: the 4 local steps between two
averagings run as one stream, a pipeline's next forwards filling another's drain; the
losses are bit-identical), avgpipe2afp4 is avgpipe2nf with advance forward propagation
(`--schedule afp:4`), as AvgPipe schedules. samples/s: the median over the steps after the fifth; ratio:
against the better of gpipe and 1f1b on the same network; bound: the samples/s the run
would reach if its busiest stage never waited (its samples over that stage's forward,
backward and inline-update seconds), against the same plain schedule, so the ratio
AvgPipe cannot pass here however it schedules; s_to_target: training seconds (steps x
median step time, evaluation excluded) to the validation loss 1f1b reaches at half its
steps. Below it the same over 400 steps, where the target is past the first plateau:
1f1b and avgpipe2afp4 trained once without emulation (the losses do not depend on the
network), their steps to the target priced at each network's median step time.
Targets (the AvgPipe paper's shape): >= 1.3x samples/s, and the target loss sooner than
gpipe and 1f1b.

```
TXT
  grep -v '^load' "$RUNS/log.txt"
  cat <<'TXT'
```

Pipeline timelines of 12 traced steps at 1 Gbit / 1 ms (one row per rank and thread,
forward and backward coloured by micro-batch and pipeline; [index](timelines/index.html)):
timelines/timeline_run1.svg (1f1b), timeline_run2.svg (avgpipe2, a flush every step),
timeline_run3.svg (avgpipe2afp4, no flush and 4 forwards ahead), timeline_run4.svg
(avgpipe2nf, no flush between averagings), timeline_run5.svg (gpipe): the folders' names
in order.
TXT
} >"$OUT/README.md"
study_end
