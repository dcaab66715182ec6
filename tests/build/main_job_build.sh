#!/usr/bin/env bash
# main_job_build.sh SOURCE_DIR BUILD_DIR: see CMakeLists.txt here.
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# The configuration of the build under test.
cached() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
args=()
for var in CMAKE_BUILD_TYPE CMAKE_PREFIX_PATH DISTLAB_WITH_VIZ DISTLAB_WITH_TESTS DISTLAB_WITH_CUDA DISTLAB_PCH DISTLAB_DEBUG_INFO; do
  value=$(cached "$var")
  [ -n "$value" ] && args+=("-D$var=$value")
done

cd "$src"
targets=$(DISTLAB_PRINT_TARGETS=1 scripts/run_main.sh)
echo "main_job_build: scripts/run_main.sh builds: $targets"
cmake -S "$src" -B "$fresh" -G Ninja "${args[@]}" > "$fresh/configure.txt" 2>&1 \
  || { cat "$fresh/configure.txt"; fail "configuring an empty build folder failed"; }
# shellcheck disable=SC2086
ninja -C "$fresh" -n $targets > "$fresh/plan.txt" || fail "ninja -n $targets failed"
# The programs and libraries the build list makes, relative to the folder.
sed -n 's/.*Linking CXX \(executable\|shared library\|static library\) //p' "$fresh/plan.txt" | sort > "$fresh/products.txt"
echo "main_job_build: it links $(wc -l < "$fresh/products.txt") products:" $(cat "$fresh/products.txt")

grep -qx "lessons/lesson_11_capstone" "$fresh/products.txt" || fail "the build list does not make lesson 11"
extra=$(grep -E '^tests/|^bench/|^viz/|^lessons/' "$fresh/products.txt" | grep -vx "lessons/lesson_11_capstone" || true)
[ -z "$extra" ] || fail "the build list makes what the main job does not run: $extra"

# Every DistLab library lesson 11 loads is one the build list makes.
lesson="$build/lessons/lesson_11_capstone"
for lib in $(ldd "$lesson" | awk -v b="$build/" 'index($3, b) == 1 { print substr($3, length(b) + 1) }'); do
  grep -qx "$lib" "$fresh/products.txt" || fail "lesson 11 loads $lib, which the build list does not make"
  echo "main_job_build: lesson 11 loads $lib: in the list"
done

"$lesson" --help > "$fresh/help.txt" || fail "lesson 11 --help exited $?"
grep -q -- "--pipeline" "$fresh/help.txt" || fail "lesson 11's --help does not list --pipeline"
"$lesson" --preset tiny --epochs 1 --batches-per-epoch 2 --eval-batches 1 --dropout 0 > "$fresh/run.txt" 2>&1 \
  || { cat "$fresh/run.txt"; fail "a tiny run of lesson 11 exited non-zero"; }
grep -q "final parameters digest" "$fresh/run.txt" || { cat "$fresh/run.txt"; fail "the tiny run printed no final digest"; }
echo "main_job_build: the build list makes lesson 11 and its libraries only; lesson 11 runs"
