#!/usr/bin/env bash
# main_job_build.sh SOURCE_DIR BUILD_DIR: see CMakeLists.txt here.
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
# A sibling of the build folder, so that ccache finds this build's files
# under the same relative paths.
fresh="${build}-main-job"
rm -rf "$fresh"
trap 'rm -rf "$fresh"' EXIT

# The configuration of the build under test.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
args=""
for var in CMAKE_BUILD_TYPE CMAKE_PREFIX_PATH DISTLAB_WITH_VIZ DISTLAB_WITH_TESTS DISTLAB_WITH_CUDA DISTLAB_PCH DISTLAB_DEBUG_INFO; do
  value=$(cached "$var")
  [ -n "$value" ] && args+=" -D$var=$value"
done

cd "$src"
start=$(date +%s)
DISTLAB_BUILD_ONLY=1 BUILD_DIR="$fresh" CMAKE_ARGS="$args" scripts/run_main.sh
echo "main_job_build: the main job's build took $(( $(date +%s) - start )) s"

lesson="$fresh/lessons/lesson_11_capstone"
[ -x "$lesson" ] || { echo "FAIL: $lesson was not built"; exit 1; }
"$lesson" --help > "$fresh/help.txt" || { echo "FAIL: $lesson --help exited $?"; exit 1; }
grep -q -- "--pipeline" "$fresh/help.txt" || { echo "FAIL: lesson 11's --help does not list --pipeline"; cat "$fresh/help.txt"; exit 1; }
# It trains: two steps of the tiny model on the bundled corpus.
"$lesson" --preset tiny --epochs 1 --batches-per-epoch 2 --eval-batches 1 --dropout 0 > "$fresh/run.txt" 2>&1 \
  || { echo "FAIL: a tiny run of lesson 11 exited $?"; cat "$fresh/run.txt"; exit 1; }
grep -q "final parameters digest" "$fresh/run.txt" \
  || { echo "FAIL: the tiny run printed no final digest"; cat "$fresh/run.txt"; exit 1; }

# Only what the job runs was built.
extra=$(cd "$fresh" && find . -type f -perm -u+x \( -name '*_tests' -o -name 'distlab-bench' -o -name 'distlab-viz' -o -name 'lesson_*' \) \
        ! -name lesson_11_capstone | sort)
if [ -n "$extra" ]; then
  echo "FAIL: the main job's build made programs the job does not run:"; echo "$extra"; exit 1
fi
echo "main_job_build: lesson 11 built alone from an empty folder, --help and a tiny run pass"
