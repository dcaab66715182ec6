#!/usr/bin/env bash
# Sets everything up, builds, and runs DistLab's main job on this machine.
#
# Today the main job is lesson 05 as a real distributed job: 4 ranks, one
# process each (gloo), started by distlab-run; every all-reduce algorithm is
# checked element by element against gloo's own and timed beside the cost
# model's prediction (alpha and beta measured here with --calibrate). With
# GPUs, the same lesson runs with one process per GPU:
#   build/launcher/distlab-run --nproc-per-node 4 -- build/lessons/lesson_05_all_reduce --backend nccl
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
build="${BUILD_DIR:-build}"
ranks="${RANKS:-4}"
exec "$build/launcher/distlab-run" --nproc-per-node "$ranks" --master-port 0 -- \
  "$build/lessons/lesson_05_all_reduce" --backend gloo --calibrate "$@"
