#!/usr/bin/env bash
# Sets everything up, builds, and runs DistLab's main job on this machine:
# the capstone (lesson 11), the DDP + Pipe tutorial's Transformer LM on 2
# pipeline stages x 2 DDP replicas, trained on the bundled corpus with the
# tutorial's loop; the loss falls, and it ends with the test loss and a
# digest of the final parameters.
#   4+ GPUs:  4 processes under distlab-run, nccl, one GPU each, preset tutorial (~0.9 B parameters)
#   1-3 GPUs: 4 thread ranks sharing the GPU(s), preset tutorial
#   no GPU:   4 thread ranks on the CPU, preset cpu (a few minutes on 2 cores)
# Extra arguments go to the lesson (e.g. --preset tiny, --trace capstone.json).
# It builds only what the job runs: the library, lesson 11 and, with 4+
# GPUs, the launcher (scripts/test.sh builds everything).
set -euo pipefail
cd "$(dirname "$0")/.."
# The same BLAS kernels on every x86-64, as the README's runs (scripts/test.sh says why).
if [ "$(uname -m)" = x86_64 ]; then export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"; fi
build="${BUILD_DIR:-build}"
lesson="$build/lessons/lesson_11_capstone"
gpus=0
if command -v nvidia-smi > /dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2> /dev/null | grep -c '^GPU' || true)
fi
targets=(lesson_11_capstone)
[ "$gpus" -ge 4 ] && targets+=(distlab-run)
# DISTLAB_PRINT_TARGETS=1: print the build list and stop (tests/build checks it).
if [ -n "${DISTLAB_PRINT_TARGETS:-}" ]; then echo "${targets[*]}"; exit 0; fi
scripts/setup.sh "${targets[@]}"
if [ "$gpus" -ge 4 ]; then
  exec "$build/launcher/distlab-run" --nproc-per-node 4 --master-port 0 -- \
    "$lesson" --backend nccl --preset tutorial "$@"
elif [ "$gpus" -ge 1 ]; then
  exec "$lesson" --backend threads --ranks 4 --device cuda --preset tutorial "$@"
else
  exec "$lesson" --backend threads --ranks 4 --preset cpu "$@"
fi
