#!/usr/bin/env bash
# main_job_build.sh SOURCE_DIR BUILD_DIR: see CMakeLists.txt here.
set -euo pipefail
src=$1
build=$(cd "$2" && pwd)
fresh=$(mktemp -d)
trap 'rm -rf "$fresh"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

cd "$src"
targets=$(DISTLAB_PRINT_TARGETS=1 scripts/run_main.sh)
echo "main_job_build: scripts/run_main.sh builds: $targets"
# What an empty folder of this configuration would make for the list: every
# command that makes the targets from nothing (ninja -t commands, whatever is
# built already), and of those the linked programs and libraries (-o, not an
# object file or a precompiled header).
# shellcheck disable=SC2086
ninja -C "$build" -t commands $targets > "$fresh/commands.txt" || fail "ninja -t commands $targets failed"
grep -oE ' -o [^ ]+' "$fresh/commands.txt" | awk '{print $2}' | grep -vE '\.(o|gch|pch)$' | sort -u > "$fresh/products.txt"
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
