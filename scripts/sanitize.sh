#!/usr/bin/env bash
# The suites that move bytes between ranks, run once under the sanitizers
# (GCC's; the whole library and the suites rebuilt with them, in a build
# folder of their own):
#
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer, ./build-asan: the
#         comm, collectives, trace, flight, checkpoint and DDP suites
#   tsan  ThreadSanitizer, ./build-tsan: the threads backend and the
#         shared-memory transport (its jobs' ranks are processes, each
#         checked by its own TSan runtime)
#
#   scripts/sanitize.sh               both
#   scripts/sanitize.sh tsan          one
#   JOBS=2 scripts/sanitize.sh asan   build jobs (default 2)
#
# LibTorch is Debian's, not instrumented: what TSan cannot see inside it
# (c10d's gloo work handed between threads under LibTorch's own mutex) is
# listed, with its reason, in scripts/sanitize/tsan.supp; nothing of
# DistLab's own is suppressed. A report stops the test that made it (halt_on_error), and
# the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
kinds=("$@")
((${#kinds[@]})) || kinds=(asan tsan)

status=0
for kind in "${kinds[@]}"; do
  case "$kind" in
    asan)
      flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
      targets=(comm_tests comm_gloo_tests collectives_tests collectives_gloo_tests trace_tests flight_tests
               flight_gloo_tests train_tests ddp_tests)
      # The checkpoint suites of train_tests (its failover runs are the lessons', not checkpoints).
      tests='^(comm_tests|comm_gloo_tests:|collectives_tests|collectives_gloo_tests:|trace_tests:|flight_tests|flight_gloo_tests:|train_tests:(Checkpoint|Crc|PickleScan)|ddp_tests)'
      export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=1:suppressions=$root/scripts/sanitize/asan.supp"
      export LSAN_OPTIONS="suppressions=$root/scripts/sanitize/lsan.supp"
      export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
      ;;
    tsan)
      flags="-fsanitize=thread -fno-omit-frame-pointer"
      targets=(comm_tests comm_gloo_tests)
      tests='^(comm_tests|comm_gloo_tests:(Shm|Gloo))'
      export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$root/scripts/sanitize/tsan.supp"
      ;;
    *) echo "sanitize.sh: unknown kind '$kind' (asan or tsan)" >&2; exit 2 ;;
  esac
  dir=build-$kind
  echo "sanitize: $kind in $dir: ${targets[*]}"
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLAB_WITH_VIZ=OFF -DDISTLAB_PCH=OFF \
    -DDISTLAB_WITH_CUDA=OFF -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" >/dev/null
  cmake --build "$dir" -j "${JOBS:-2}" --target "${targets[@]}" distlab-run
  (cd "$dir" && ctest --output-on-failure -R "$tests" -j 1) || status=1
done
exit $status
