#!/usr/bin/env bash
# Build the libFuzzer targets of fuzz/ (clang, AddressSanitizer + UndefinedBehaviorSanitizer)
# in build-asan/ (the build scripts/sanitize.sh runs the suite in) and run each for
# SECONDS (default 12) from its seed corpus, as many at once as there are cores.
#   scripts/fuzz.sh [SECONDS] [HARNESS...]      e.g. scripts/fuzz.sh 600 checkpoint
# New interesting inputs accumulate in build-asan/fuzz-corpus/<harness>/ (kept between
# runs). A crash, leak or timeout stops with the input in build-asan/artifacts/ and exit 1;
# see fuzz/README.md for turning it into a regression test. CI runs the short mode.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-12}
shift || true
harnesses=("$@")
[ ${#harnesses[@]} -gt 0 ] || harnesses=(idx safetensors checkpoint replica options json report)

if ! command -v clang >/dev/null; then
  echo "fuzz: clang is missing (scripts/setup.sh installs it)" >&2
  exit 1
fi
SANITIZE_SOURCED=1 source scripts/sanitize.sh
configure_asan
B=build-asan
cmake --build $B -j "$(nproc)" --target "${harnesses[@]/#/fuzz_}" >/dev/null

# The harnesses write their files under $TMPDIR: memory, not disk (10-20x faster).
work=$(mktemp -d -p /dev/shm 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT
export TMPDIR=$work
export ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export OPENBLAS_NUM_THREADS=1
mkdir -p $B/artifacts

# One harness: its log in $B/fuzz-<harness>.log, its exit status in .rc.
run_one() {
  local h=$1 corpus=$B/fuzz-corpus/$1 dict=() rc=0
  mkdir -p "$corpus"
  [ -f fuzz/dict/$h.dict ] && dict=(-dict=fuzz/dict/$h.dict)
  $B/fuzz/fuzz_$h -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix=$B/artifacts/$h- "${dict[@]}" \
    "$corpus" fuzz/corpus/$h >$B/fuzz-$h.log 2>&1 || rc=$?
  echo $rc >$B/fuzz-$h.rc
}

# As many at once as there are cores: each fuzzer is one process on one core.
for h in "${harnesses[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "$(nproc)" ]; do wait -n || true; done
  run_one "$h" &
done
wait

printf '%-12s %8s %8s %8s %8s %7s\n' harness runs exec/s cov ft corpus
failed=()
for h in "${harnesses[@]}"; do
  log=$B/fuzz-$h.log
  # The last status line: "#N  DONE  cov: C ft: F corp: K/S ... exec/s: E ..."
  last=$(grep -E '^#[0-9]+' "$log" | tail -1)
  field() { sed -nE "s/.* $1: ([0-9]+).*/\\1/p" <<<"$last"; }
  stat_of() { sed -nE "s/^stat::$1:[[:space:]]+([0-9]+).*/\\1/p" "$log"; }
  printf '%-12s %8s %8s %8s %8s %7s\n' "$h" "$(stat_of number_of_executed_units)" \
    "$(stat_of average_exec_per_sec)" "$(field cov)" "$(field ft)" \
    "$(sed -nE 's/.* corp: ([0-9]+).*/\1/p' <<<"$last")"
  rc=$(cat $B/fuzz-$h.rc)
  if [ "$rc" -ne 0 ]; then
    failed+=("$h")
    echo "fuzz: $h failed (exit $rc); log: $log" >&2
    grep -E 'ERROR|SUMMARY|Test unit written|runtime error' "$log" >&2 || tail -20 "$log" >&2
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failures in ${failed[*]}; reproduce with $B/fuzz/fuzz_<harness> <artifact>" >&2
  exit 1
fi
