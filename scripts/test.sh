#!/usr/bin/env bash
# Sets everything up, builds, and runs the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The set-up just installed python3-torch, torchtext, torchrun and mpirun:
# a test that needs one of them fails rather than skips when it is missing
# (tests/support/required_tool.hpp). Only the GPU tests skip without a GPU.
export CI="${CI:-true}"
# Three tests share two cores. LibTorch's OpenMP threads spin after each
# parallel region waiting for the next, and a spinning thread holds a core
# another test's thread needs: lesson 17 on a machine busy building took
# 80 CPU-seconds with spinning threads and 8 with sleeping ones
# (OMP_WAIT_POLICY=PASSIVE: they wait on a futex; what is computed is the
# same, only the waiting changes).
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"
# OpenBLAS picks its kernels by CPU, and its AVX-512 kernels (an AMD Zen 4,
# an Intel Skylake-X) add a product's terms in another order than its AVX2
# ones (Haswell's, which it runs on Zen 2 and 3): the last bits of every
# product change, and with them a lesson's largest differences, its losses'
# last digits and the capstone's parameter digests that the READMEs show and
# the docs check compares. The same kernels on every x86-64 give the same
# bits (OPENBLAS_CORETYPE: read when the library loads, so it is set here).
if [ "$(uname -m)" = x86_64 ]; then export OPENBLAS_CORETYPE="${OPENBLAS_CORETYPE:-Haswell}"; fi
# A failing GoogleTest case prints its failure and nothing of the cases that
# passed: the failure leads what --output-on-failure shows.
export GTEST_BRIEF="${GTEST_BRIEF:-1}"
cd "${BUILD_DIR:-build}"
# Three at once on two cores: the failover, hang and elastic tests spend most
# of their time waiting for a peer's timeout, and a third test fills those
# waits (ctest -j 2: 928 s on the 2-core VM, 2026-11-27).
# The set-up built the slides and the browser site (the slide and browser
# checks' fixtures, slides_build and web_build): not made a second time here.
ctest --output-on-failure -j "${JOBS:-3}" -E '^(slides_build|web_build)$' -FS '^(slides|web_site)$' "$@"
