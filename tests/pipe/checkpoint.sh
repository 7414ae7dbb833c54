#!/usr/bin/env bash
# Checkpoints of a pipeline (one shard per stage):
#  - SIGTERM to one rank of a 2-stage run stops both at the same step with a
#    checkpoint of that step and exit code 3; --resume goes on with exactly the
#    losses of an uninterrupted run (bit-identical), on the checkpoint's partition;
#  - the checkpoint resumes on another --dp (dp 2 x pp 2 on 4 ranks) with the same
#    losses to float rounding;
#  - another --pp, or another --partition, is refused with one line naming it, exit 2;
#  - `bagpipe sample` on a 4-stage checkpoint writes the same text as on the
#    checkpoint of one process trained alike (same seed).
source "$(dirname "$0")/lib.sh"

opts=("${SMALL_GPT[@]}" --eval-every 0 --pp 2 --micro-batches 4 --schedule afp:1)

# ---- interrupt and resume ------------------------------------------------------------
# --partition 1,3 is not what balancing gives (3,1: the head costs most), so a
# resume that ignored the checkpoint's partition would show.
sig="$WORK/sig"
read -ra flags <<<"${BP_MPIEXEC_FLAGS:-}"
timeout -k 5 60 "$BP_MPIEXEC" "${flags[@]}" -n 2 "$BP" train "${opts[@]}" --partition 1,3 \
  --steps 100000000 --out "$sig" >"$WORK/sig.out" 2>&1 &
launcher=$!
# Stop it once it has logged 20 steps (the signal handlers are in place by then).
for _ in $(seq 600); do
  [ "$(values "$sig/metrics.jsonl" step loss 2>/dev/null | wc -l)" -ge 20 ] && break
  sleep 0.05
done
[ "$(values "$sig/metrics.jsonl" step loss 2>/dev/null | wc -l)" -ge 20 ] ||
  fail "the 2-stage run logged no 20 steps in 30 s: $(cat "$WORK/sig.out")"
victim=$(pgrep -f "^$BP train .*--out $sig" | tail -n 1 || true)
[ -n "$victim" ] || fail "no rank of the 2-stage run found: $(cat "$WORK/sig.out")"
kill -TERM "$victim"
rc=0
wait "$launcher" || rc=$?
[ "$rc" -eq 3 ] || fail "exit code $rc after SIGTERM, expected 3: $(cat "$WORK/sig.out")"
grep -q "stopped by a signal after step" "$WORK/sig.out" || fail "no stop message: $(cat "$WORK/sig.out")"
step=$(sed -E 's/ckpt-0*//' "$sig/latest")
[ "$(values "$sig/metrics.jsonl" step loss | tail -n 1 | cut -d' ' -f1)" = "$step" ] ||
  fail "the checkpoint (step $step) is not at the last logged step"
for s in 0 1; do
  [ -s "$sig/ckpt-$(printf %08d "$step")/stage$s-tp0.safetensors" ] || fail "no shard of stage $s"
done
echo "interrupted at step $step"

total=$((step + 5))
launch 2 "$BP" train "${opts[@]}" --partition 1,3 --steps "$total" --out "$WORK/full" \
  >/dev/null 2>"$WORK/err" || fail "the uninterrupted run failed: $(cat "$WORK/err")"
launch 2 "$BP" train "${opts[@]}" --steps "$total" --resume "$sig" --out "$WORK/res" --progress lines \
  >"$WORK/res.out" 2>&1 || fail "resume failed: $(cat "$WORK/res.out")"
grep -q "resumed from .* at step $step" "$WORK/res.out" || fail "no resume note: $(cat "$WORK/res.out")"
[ "$(field "$WORK/res/metrics.jsonl" config partition)" = 1,3 ] ||
  fail "resumed on partition $(field "$WORK/res/metrics.jsonl" config partition), not the checkpoint's 1,3"
diff <(values "$WORK/full/metrics.jsonl" step loss | tail -n 5) <(values "$WORK/res/metrics.jsonl" step loss) ||
  fail "resumed losses differ from the uninterrupted run"
echo "resumed at step $step: the next 5 losses are bit-identical"

# ---- another --dp, --pp, --partition -----------------------------------------------
launch 4 "$BP" train "${opts[@]}" --dp 2 --steps "$total" --resume "$sig" --out "$WORK/dp2" \
  --progress lines >"$WORK/dp2.out" 2>&1 || fail "resume on dp 2 x pp 2 failed: $(cat "$WORK/dp2.out")"
grep -q "resumed from .* at step $step" "$WORK/dp2.out" || fail "no resume note on dp 2"
[ "$(field "$WORK/dp2/metrics.jsonl" config dp)" = 2 ] || fail "the resume was not on dp 2"
grep '"type":"step"' "$WORK/full/metrics.jsonl" | tail -n 5 >"$WORK/full5.jsonl"
same "resume on dp 2 x pp 2" "$WORK/full5.jsonl" "$WORK/dp2/metrics.jsonl" step loss 1e-4

# resume_refused W OPTION options...: resuming the 2-stage checkpoint on W ranks
# with options is a usage error whose one line names the checkpoint and OPTION.
resume_refused() {
  local w=$1 option=$2
  shift 2
  refused "$w" "^bagpipe: .*error: .*checkpoint .*$option" -- "${SMALL_GPT[@]}" --eval-every 0 \
    --steps "$total" --resume "$sig" "$@"
}
resume_refused 1 --pp --pp 1 # 2 stages on 1 rank
resume_refused 4 --pp --pp 4 # 2 stages on 4 ranks
resume_refused 2 --partition --pp 2 --partition 2,2 # 1,3 on 2,2

# ---- sampling ------------------------------------------------------------------------
launch 1 "$BP" train "${SMALL_GPT[@]}" --eval-every 0 --steps 20 --out "$WORK/one" >/dev/null 2>&1 ||
  fail "the one-process run failed"
launch 4 "$BP" train "${SMALL_GPT[@]}" --eval-every 0 --steps 20 --pp 4 --micro-batches 2 \
  --out "$WORK/pp4" >/dev/null 2>&1 || fail "the 4-stage run failed"
sample=(--prompt "GNU General" --length 200 --seed 3)
"$BP" sample --ckpt "$WORK/one" "${sample[@]}" >"$WORK/a" || fail "sampling one process's checkpoint failed"
"$BP" sample --ckpt "$WORK/pp4" "${sample[@]}" >"$WORK/b" 2>"$WORK/err" ||
  fail "sampling the 4-stage checkpoint failed: $(cat "$WORK/err")"
[ "$(wc -c <"$WORK/b")" -eq 212 ] || fail "expected prompt + 200 bytes + newline, got $(wc -c <"$WORK/b")"
cmp -s "$WORK/a" "$WORK/b" || fail "the 4-stage checkpoint samples '$(cat "$WORK/b")', one process '$(cat "$WORK/a")'"
"$BP" sample --ckpt "$WORK/pp4" --prompt "GNU General" --length 200 --seed 4 >"$WORK/c"
! cmp -s "$WORK/b" "$WORK/c" || fail "another seed sampled the same text: the comparison cannot fail"
echo "sample: the 4-stage and the one-process checkpoint write the same text"
echo "ok"
