#!/usr/bin/env bash
# Fuzzes the trace parser path of the visualizer with libFuzzer (clang),
# AddressSanitizer and UBSan, starting from the seeds and the kept corpus,
# then merges what it found into the kept corpus (viz/fuzz/corpus).
#
#   viz/fuzz/run_fuzz.sh [SECONDS=600] [extra libFuzzer flags...]
#
# Needs clang and libclang-rt-14-dev (in scripts/setup.sh). Builds in
# build-fuzz/ (a clang build of this target only). A crash leaves its input
# as crash-* in the current folder: reproduce with
#   build-fuzz/viz/distlab-viz-fuzz crash-<hash>
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-600}"
shift || true
build=build-fuzz
if [ ! -f "$build/build.ninja" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
    -DDISTLAB_VIZ_FUZZ=ON -DDISTLAB_WITH_TESTS=OFF -DDISTLAB_WITH_CUDA=OFF >/dev/null
fi
ninja -C "$build" -j2 distlab-viz-fuzz
corpus=viz/fuzz/corpus
new=$(mktemp -d)
mkdir -p "$corpus"
# -rss_limit_mb: a parser that lets memory grow with the input is a finding.
"$build/viz/distlab-viz-fuzz" "$new" "$corpus" viz/fuzz/seeds -dict=viz/fuzz/trace.dict \
  -max_total_time="$seconds" -max_len=16384 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$@"
# Keep only inputs that add coverage: the kept corpus and the new finds
# merged into an empty folder (libFuzzer's -merge=1 minimises; without hit
# counters, -use_counters=0, an input must reach a new edge, which keeps the
# corpus at a few hundred files), which then replaces the kept corpus.
minimal=$(mktemp -d)
"$build/viz/distlab-viz-fuzz" -merge=1 -use_counters=0 "$minimal" "$corpus" "$new" -dict=viz/fuzz/trace.dict -max_len=16384 \
  -timeout=10 -rss_limit_mb=2048 >/dev/null 2>&1
rm -rf "$corpus" "$new"
mv "$minimal" "$corpus"
echo "run_fuzz: corpus has $(ls "$corpus" | wc -l) inputs"
