# Shared by the study scripts in experiments/ (sourced, not run). A study writes its
# page, tables and plots into docs/results/NAME.new and moves it over docs/results/NAME
# only when it finished, so a failed or interrupted rerun leaves the previous results
# whole; then docs/RESULTS.md is regenerated from every study's page.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BP=${BAGPIPE:-$ROOT/build/bagpipe}
export OPENBLAS_NUM_THREADS=1
[ -x "$BP" ] || { echo "experiments: $BP: not an executable (build first: scripts/build.sh)" >&2; exit 1; }

# study_begin NAME TITLE: sets OUT (the page's folder being written) and RUNS (run folders
# and the study's log, kept outside the tree: checkpoints and logs are not results).
study_begin() {
  STUDY=$1 TITLE=$2 T0=$(date +%s) LOAD0=$(cut -d' ' -f1 /proc/loadavg)
  OUT=$ROOT/docs/results/$STUDY.new
  RUNS=${RUNS_DIR:-/tmp/bagpipe_experiments}/$STUDY
  rm -rf "$OUT"
  # PAGE_ONLY=1, where a study takes it: its page again from the runs already in RUNS
  [ "${PAGE_ONLY:-0}" = 1 ] || rm -rf "$RUNS"
  mkdir -p "$OUT" "$RUNS"
  echo "experiments/$STUDY.sh: runs in $RUNS, results into docs/results/$STUDY"
}

# The page's header: what ran where and when. Later lines of the page come from the study.
study_header() {
  local commit dirty=""
  commit=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)
  git -C "$ROOT" diff --quiet HEAD -- src include 2>/dev/null || dirty=" (with uncommitted changes to src/)"
  cat <<HDR
# $TITLE

- command: \`experiments/$STUDY.sh\`
- machine: $(nproc) cores, $(sed -nE 's/^model name\s*:\s*//p' /proc/cpuinfo | head -1), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)
- commit: $commit$dirty
- date: $(date -u '+%Y-%m-%d %H:%M UTC')
HDR
  cpu_share_note
}

# Where the study ran in a cpu cgroup of its own (cgroup v1) with a larger share than the
# rest of the machine, the load average counts work that got little of the CPU: say so.
cpu_share_note() {
  local cg shares
  cg=$(sed -nE 's/^[0-9]+:([^:]*,)?cpu(,[^:]*)?:(.+)$/\3/p' /proc/self/cgroup | head -1)
  [ -n "$cg" ] && [ "$cg" != / ] && [ -r "/sys/fs/cgroup/cpu$cg/cpu.shares" ] || return 0
  shares=$(cat "/sys/fs/cgroup/cpu$cg/cpu.shares")
  echo "- CPU: ran in the cpu cgroup $cg with cpu.shares $shares (the machine's other work at the default 1024 or less), so the load average below counts work that got little of the CPU"
}

# plots NAME RUN_DIR... : bagpipe report of these runs into $OUT/NAME (index.html and the plots)
plots() {
  local name=$1
  shift
  "$BP" report "$@" --out "$OUT/$name" >/dev/null
  # index.html shows the SVGs; the PNGs would double the pages' size, and the plots' data
  # and scripts are regenerated from the runs by this command: only the SVGs are kept.
  rm -f "$OUT/$name"/*.png "$OUT/$name"/*.dat "$OUT/$name"/*.gp
  sed -i 's| <a href="[^"]*\.png">PNG</a> <a href="[^"]*\.gp">script</a>||' "$OUT/$name/index.html"
}

# runs_with KEY VALUE RUN_DIR... : the run folders whose config record has KEY = VALUE
runs_with() {
  local key=$1 value=$2
  shift 2
  for d in "$@"; do
    [ -f "$d/metrics.jsonl" ] || continue # the glob's logs and tables
    head -n 1 "$d/metrics.jsonl" | grep -q "\"$key\":\"$value\"" && echo "$d"
  done
  return 0
}

# study_end: load and duration into the page, the page into place, RESULTS.md regenerated.
study_end() {
  local secs=$(($(date +%s) - T0))
  printf '\n_Ran for %d min; 1-minute load average %s before, %s after._\n' \
    $((secs / 60)) "$LOAD0" "$(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/README.md"
  rm -rf "$ROOT/docs/results/$STUDY"
  mv "$OUT" "$ROOT/docs/results/$STUDY"
  /usr/bin/python3 "$ROOT/experiments/results_index.py"
  echo "experiments/$STUDY.sh: done in $((secs / 60)) min: docs/results/$STUDY/README.md"
}
