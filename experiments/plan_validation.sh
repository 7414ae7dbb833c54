#!/usr/bin/env bash
# bagpipe plan against measured times to a loss (bench/plan/validate.py): 2 and 4
# kernel-shaped hosts (scripts/cluster.sh, cluster name `plan`, removed after each
# setting) at four networks, plan's top configurations timed there and trained once
# unshaped for their losses; per setting the regret of plan's first pick and the rank
# correlation of predicted against measured time to the loss.
# Environment: BAGPIPE (binary), RUNS_DIR, HOSTS (2,4), SETTINGS (rate:latency,...),
# TOP (6), SPREAD (0: configurations taken further down the ranking), TIMED (40 steps
# per shaped run), STEPS (300), TRIAL_KINDS (16: plan's factors from --trials over that
# many kinds, once per host count, unshaped; 0: the shipped table), PASSES (5: each
# configuration timed that many times per setting, every other pass in reverse order;
# its step the median pass), PAGE_ONLY (1: the page again from the runs in RUNS_DIR and
# the page's validate.json, its measured columns recomputed; nothing run).
source "$(dirname "$0")/lib.sh"
study_begin plan_validation "bagpipe plan: predicted against measured time to a loss"
again=()
[ "${PAGE_ONLY:-0}" != 1 ] || again=(--rescore "$ROOT/docs/results/plan_validation/validate.json")
BAGPIPE=$BP /usr/bin/python3 "$ROOT/bench/plan/validate.py" "${again[@]}" --hosts "${HOSTS:-2,4}" \
  --settings "${SETTINGS:-10gbit:0.1ms,1gbit:1ms,100mbit:5ms,20mbit:20ms}" --top "${TOP:-6}" \
  --spread "${SPREAD:-0}" --timed-steps "${TIMED:-40}" --steps "${STEPS:-300}" --trial-kinds "${TRIAL_KINDS:-16}" --passes "${PASSES:-5}" --out "$RUNS" --json "$OUT/validate.json" --markdown "$OUT/table.md" |
  tee "$RUNS/log.txt"
{
  study_header
  cat <<'TXT'

A gpt of 2 layers and 64 channels, batch 16, one rank per host, not bound to a core
(before 2026-12-05 every host's rank was bound to core 0 of this shared machine, so
all ranks ran on one core). Per setting, `bagpipe
plan` ran on the shaped hosts (bandwidth by the kernel's tbf; latency by the runtime's
emulation, --net lat=..., since this kernel has no netem) and ranked every
configuration; its top ones (and, with SPREAD, ones further down its ranking) and
plain allreduce then trained a few steps there (mean step time of steps 3 on but the
last, over a multiple of 4 steps so that easgd's and AvgPipe's averaging every 4 steps
counts in full; the count is in the log's command line; the last step, where every
rank agrees whatever the algorithm, counted once in the run's steps: from 2026-12-06,
before which it weighed as one step in 8 on the algorithms with local steps, diloco's
at 20 ms latency 2.5x their length; async, whose ranks agree every 10 steps, 12 steps
more and timed over 20), once per pass, every other pass in
reverse order so that the machine's speed drifting over minutes weighs on all alike,
and a configuration's step is its median pass (from 2026-12-07; the mean of two
before: this machine's two cores are virtual, and for seconds at a time both compute
up to 1.6x slower, so that a whole pass of one configuration ran at 4.5-4.8 ms where
its others ran at 2.8-3.2);
qadam, whose first 100 steps run as allreduce, timed in its warm-up and after it,
weighted by their shares of the steps (plan predicts the mean over the run); diloco
and streaming-diloco, whose outer steps come every 100 steps, which a timed run never
reaches, timed again with one every 4 steps, their cost spread over the 100 (before
2026-12-04 they were not: their measured steps lacked it). Each configuration also trained once unshaped on this
machine's ranks for its validation curve (losses do not depend on the network; async,
whose steps to a loss depend on when its thread's transfers land, three times and
the median taken, from 2026-12-07); the
target is allreduce's validation loss at 60% of its steps, and a configuration's
measured time to the loss is its steps to the target times its shaped step time.
Regret: plan's first pick's measured time over the best measured, less 1 (target:
within 10%). Spearman: rank correlation of predicted and measured time to the loss
among the configurations timed (target >= 0.8), and of the step times alone.
Statistical efficiency: with TRIAL_KINDS > 0, `bagpipe plan --trials STEPS --trial-kinds
TRIAL_KINDS` ran once per host count on this machine's ranks, unshaped (a kind's steps to
a loss do not depend on the network), and each setting's plan took those factors with
`--factors`; kinds beyond them keep the shipped table's (measured on the default gpt).

TXT
  echo "Parameters: hosts ${HOSTS:-2,4}; settings ${SETTINGS:-10gbit:0.1ms,1gbit:1ms,100mbit:5ms,20mbit:20ms};"
  echo "top ${TOP:-6}, spread ${SPREAD:-0}, ${TIMED:-40} timed steps, ${STEPS:-300} steps for the losses;"
  echo "trial kinds ${TRIAL_KINDS:-16}, ${PASSES:-5} timing passes; binary $BP."
  echo
  cat "$OUT/table.md"
  echo
  cat "$ROOT/bench/plan/plan_validation_notes.md"
} >"$OUT/README.md"
study_end
