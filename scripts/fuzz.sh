#!/usr/bin/env bash
# Fuzzes every reader of outside bytes (tests/fuzz/README.md): each target
# built with clang's libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer
# in ./build-fuzz, then run for a stated time on its corpus and dictionary.
# What a run finds (crash-*, leak-*, timeout-*, oom-*) is left in
# build-fuzz/fuzz-runs/<target>/, with the command that replays it.
#
#   scripts/fuzz.sh                       every target, 600 s each
#   scripts/fuzz.sh --seconds 120 json_pull trace_merge
#   scripts/fuzz.sh --merge               minimise each corpus in tests/fuzz/corpus
#                                         (libFuzzer's -merge=1, with what the runs grew; named inputs kept)
#   scripts/fuzz.sh --build-only
#
# The LibTorch readers (options, checkpoint, sharded_checkpoint,
# shape_header) take the rest of libdistlab from the normal build in
# ./build (made here with -j 2 if missing); only their reader's own files
# are instrumented.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

seconds=600 merge=0 build_only=0 targets=()
while (($#)); do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --merge) merge=1; shift ;;
    --build-only) build_only=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
all=(json_pull trace_events trace_dom trace_merge live_stream flight_why planner_profile plan_record
     options checkpoint shape_header sharded_checkpoint gloo_header)
((${#targets[@]})) || targets=("${all[@]}")
torch_targets=" options checkpoint sharded_checkpoint shape_header gloo_header "

dict_of() {
  case "$1" in
    options) echo tests/fuzz/dict/options.dict ;;
    checkpoint|sharded_checkpoint) echo tests/fuzz/dict/checkpoint.dict ;;
    shape_header|gloo_header) echo "" ;;
    *) echo tests/fuzz/dict/json.dict ;;
  esac
}

need_torch=0
for t in "${targets[@]}"; do [[ $torch_targets == *" $t "* ]] && need_torch=1; done
if ((need_torch)) && [[ ! -f build/lib/libdistlab.so ]]; then
  cmake -S . -B build -G Ninja >/dev/null
  cmake --build build -j "${JOBS:-2}" --target distlab
fi

# vptr is left out: its checks compare type information across LibTorch's
# uninstrumented libraries, which it cannot see whole.
flags="-fsanitize=address,undefined -fno-sanitize=vptr -fsanitize=fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-fuzz -G Ninja -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDISTLAB_FUZZ=ON -DDISTLAB_WITH_VIZ=OFF -DDISTLAB_PCH=OFF \
  -DDISTLAB_WITH_CUDA=OFF -DDISTLAB_FUZZ_TORCH_LIBRARY="$root/build/lib/libdistlab.so" \
  -DCMAKE_C_FLAGS="$flags" -DCMAKE_CXX_FLAGS="$flags" >/dev/null
cmake --build build-fuzz -j "${FUZZ_BUILD_JOBS:-1}" --target "${targets[@]/#/fuzz_}"
((build_only)) && exit 0

export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
status=0
for t in "${targets[@]}"; do
  exe=build-fuzz/tests/fuzz/fuzz_$t
  corpus=tests/fuzz/corpus/$t
  work=build-fuzz/fuzz-runs/$t
  mkdir -p "$work/corpus"
  dict=$(dict_of "$t")
  # LibTorch's own leak on a damaged zip (tests/fuzz/lsan-libtorch.supp).
  if [[ $torch_targets == *" $t "* ]]; then export LSAN_OPTIONS="suppressions=$root/tests/fuzz/lsan-libtorch.supp"
  else unset LSAN_OPTIONS; fi
  if ((merge)); then
    # The minimal set that covers what the corpus and the runs' finds cover;
    # named inputs (finding-*, each a fixed finding, and the seeds written
    # by hand) stay as they are: only libFuzzer's own, named by their
    # SHA-1, are minimised.
    fresh=$(mktemp -d)
    find "$corpus" -maxdepth 1 -type f -regextype posix-extended ! -regex '.*/[0-9a-f]{40}' -exec cp {} "$fresh"/ \;
    "$exe" -merge=1 -artifact_prefix="$work/" "$fresh" "$corpus" "$work/corpus" 2>"$work/merge.log" || { tail -20 "$work/merge.log"; status=1; continue; }
    rm -f "$corpus"/*
    cp "$fresh"/* "$corpus"/
    rm -rf "$fresh"
    echo "fuzz: $t: corpus minimised to $(ls "$corpus" | wc -l) files"
    continue
  fi
  # LibTorch's unpickler reserves what a string's length field claims
  # before reading it (up to 4 GiB from a 32-bit length; found by
  # fuzz_checkpoint, docs/fuzzing.md): reported once, then let through up
  # to 8 GiB, so that the rest of the reader is still fuzzed.
  malloc_limit=1024
  [[ $torch_targets == *" $t "* ]] && malloc_limit=8192
  echo "fuzz: $t for ${seconds} s (corpus $(ls "$corpus" | wc -l) files${dict:+, dictionary $dict})"
  start=$(date +%s)
  if "$exe" "$work/corpus" "$corpus" ${dict:+-dict=$dict} -max_total_time="$seconds" -timeout=10 \
      -rss_limit_mb=2048 -malloc_limit_mb="$malloc_limit" -artifact_prefix="$work/" -print_final_stats=1 \
      >"$work/run.log" 2>&1; then
    echo "fuzz: $t: no finding in $(( $(date +%s) - start )) s ($(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$work/run.log" | grep -o '[0-9]*$') runs)"
  else
    status=1
    echo "fuzz: $t: FINDING after $(( $(date +%s) - start )) s; replay: $exe $(ls -t "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* 2>/dev/null | head -1)"
    grep -m3 -E 'ERROR|runtime error|terminate called|what\(\)|abort' "$work/run.log" || tail -5 "$work/run.log"
  fi
done
exit $status
