#!/usr/bin/env bash
# The test suite under sanitizers, each in its own build directory:
#   scripts/sanitize.sh asan   build-asan/: AddressSanitizer + UndefinedBehaviorSanitizer
#                              (-DBP_SANITIZE=ON) on the tests chosen below; built with
#                              clang and the fuzz harnesses, so that scripts/fuzz.sh
#                              reuses the same build
#   scripts/sanitize.sh tsan   build-tsan/: ThreadSanitizer (-DBP_TSAN=ON) on the tests that
#                              run the communication threads
#   scripts/sanitize.sh        both (CI runs this from scripts/test.sh)
# Extra arguments go to ctest. Any report fails the test that produced it.
#
# Suppressions (scripts/*.supp) cover only Open MPI's and its libraries' own
# allocations, never bagpipe code: see the comments in each file.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
[ $# -gt 0 ] && shift
jobs=$(nproc)
supp=$PWD/scripts
export OPENBLAS_NUM_THREADS=1

# ---- ASan + UBSan --------------------------------------------------------------
# Every `fast` test of one process (unit tests, the cli tests, the fuzz corpus
# replays; new ones join by themselves) and the multi-rank tests listed in ASAN_MPI.
# Under ASan each process start costs about a second (Open MPI loads ~100 plugins and
# the slow unwinding below walks them), so tests that start mpiexec or bagpipe many
# times cost 3-7x their normal time; ASAN_MPI picks one test for each piece of
# multi-rank code: collectives, primitives, async averaging and the watchdog on 1-3
# ranks, the dp engine (every algorithm, buckets), the pipeline grid and compressed
# backpropagation, checkpoints written by 2 ranks and resumed on 1 and 4, pipeline
# checkpoints, traces gathered from 2 ranks and the report drawn from them. Left
# out: the same tests on 4 ranks, whole training runs compared across rank counts
# (equivalence), option errors under mpiexec (the same error
# paths run in cli_bad_input), jobs killed or stopped on purpose (mostly waiting),
# the `slow` quality runs (minutes of training), test_comm_net (it times emulated
# links against their model within 10%, which ASan's slowdown breaks; the code it
# runs is the transport every other comm test uses), and cli_help, ~120 processes that
# only parse options: fuzz_options runs that parser under ASan+UBSan millions of
# times and its corpus replays here.
ASAN_MPI='test_comm_(coll|async)_np[123]|test_comm_prim_np2|test_comm_fail_job|example_comm_average_np3|test_dp_reference_np[23]|test_pipe_grid_np[23]|occ_cb_np2|faults_resize|pipe_checkpoint|trace|report'
ASAN_EXCLUDE='cli_help'

# Names of the tests ctest would run with these arguments.
test_names() { ctest --test-dir "$1" -N "${@:2}" | sed -nE 's/^ *Test +#[0-9]+: (.+)$/\1/p'; }

# Configure build-asan (also used by scripts/fuzz.sh): clang with the fuzz harnesses
# when clang is there, else the default compiler without them.
configure_asan() {
  if command -v clang >/dev/null; then
    # CMake keeps the compiler of an existing build: start over if it is not clang.
    if [ -f build-asan/CMakeCache.txt ] &&
      ! grep -q '^CMAKE_C_COMPILER:.*clang' build-asan/CMakeCache.txt; then
      rm -rf build-asan
    fi
    CC=clang cmake -S . -B build-asan -DBP_SANITIZE=ON -DBP_FUZZ=ON >/dev/null
  else
    cmake -S . -B build-asan -DBP_SANITIZE=ON >/dev/null
  fi
}

run_asan() {
  configure_asan
  cmake --build build-asan -j "$jobs" >/dev/null
  local names
  names=$({ test_names build-asan -L fast -LE mpi; test_names build-asan -R "^($ASAN_MPI)\$"; } |
    grep -vxE "$ASAN_EXCLUDE" | sort -u | paste -sd'|')
  # Slow (DWARF) unwinding at malloc: Open MPI is built without frame pointers, and
  # the suppressions match the MPI entry point deep in the allocation's stack.
  ASAN_OPTIONS=fast_unwind_on_malloc=0:detect_leaks=1 \
  LSAN_OPTIONS=suppressions=$supp/lsan.supp:print_suppressions=0 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j "$jobs" -R "^($names)\$" "$@"
}

# ---- TSan ----------------------------------------------------------------------
# The threads that communicate while the main thread computes: the bucket thread
# of parallel/buckets.c (gradients averaged while backward runs), the async
# averaging thread of comm/async.c and the watchdog of comm/watchdog.c, driven
# through the dp engine (test_dp_reference: every algorithm, buckets, async, with
# the watchdog on), through the comm library alone (test_comm_async on 2 and 3
# ranks) and with the watchdog firing (test_comm_fail_job); and the trace those
# threads record on together with the main thread (test_trace).
TSAN_TARGETS=(test_comm_async test_dp_reference fail_job test_trace)
TSAN_TESTS='test_comm_async_np[23]|test_dp_reference_np2|test_comm_fail_job|test_trace'

run_tsan() {
  cmake -S . -B build-tsan -DBP_TSAN=ON >/dev/null
  cmake --build build-tsan -j "$jobs" --target "${TSAN_TARGETS[@]}" >/dev/null
  # ignore_noninstrumented_modules: Open MPI's and OpenBLAS's own synchronization is
  # invisible to TSan (not instrumented) and would otherwise show as races inside them.
  TSAN_OPTIONS="suppressions=$supp/tsan.supp ignore_noninstrumented_modules=1 halt_on_error=0 second_deadlock_stack=1" \
    ctest --test-dir build-tsan --output-on-failure -j "$jobs" -R "^($TSAN_TESTS)\$" "$@"
}

[ "${SANITIZE_SOURCED:-0}" = 1 ] && return 0

case $what in
asan) run_asan "$@" ;;
tsan) run_tsan "$@" ;;
all)
  run_asan "$@"
  run_tsan "$@"
  ;;
*)
  echo "usage: scripts/sanitize.sh [asan|tsan|all] [ctest options]" >&2
  exit 2
  ;;
esac
