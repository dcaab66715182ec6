#!/usr/bin/env bash
# scripts/gpu_check.sh, the GPU kit, checked here where there is no GPU:
#  1. its dry run names only targets this build has, in both modes, and
#     each target's file is where the kit will look for it;
#  2. its own logic, on a made-up build folder whose build.ninja makes one
#     tool and fails to compile another: a check that passes, one that
#     fails, one that outruns its time box, one whose target did not build,
#     one past the deadline; each reported as such, the run going on after
#     each, the compiler's error kept, the exit status non-zero;
#  3. its CPU form of two real checks in this build: nccl refused without a
#     GPU (the refusal's text), and a CUDA-only check reported as needing one.
#
#   tests/build/gpu_check_test.sh REPO BUILD
set -uo pipefail
repo=$1 build=$2
kit=$repo/scripts/gpu_check.sh
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failed=0
fail() { echo "FAIL: $*"; failed=1; }
expect_line() {  # FILE PATTERN (grep -E) WHAT
  grep -qE -- "$2" "$1" || { fail "$3: no line matching '$2' in $1:"; sed 's/^/    /' "$1"; }
}

# 1. The dry run's targets against the build's.
ninja -C "$build" -t targets all >"$work/targets" || fail "ninja -t targets in $build"
for mode in "" --cpu; do
  "$kit" --dry-run $mode --build-dir "$build" >"$work/dry" || fail "--dry-run $mode exited $?"
  n=0
  while read -r _ name _ path; do
    n=$((n + 1))
    grep -q "^$name: phony" "$work/targets" || fail "--dry-run $mode names target '$name', which this build does not have"
    [ -f "$path" ] || fail "--dry-run $mode: target $name's file is not at $path"
  done < <(grep '^  target ' "$work/dry")
  ((n >= 5)) || fail "--dry-run $mode named $n targets"
  expect_line "$work/dry" '^  check layouts \(150s' "--dry-run $mode lists the layouts check with its box"
  checks=$(grep -c '^  check ' "$work/dry")
  ((checks >= 9)) || fail "--dry-run $mode lists $checks checks"
done
"$kit" --dry-run --only no_such_check >/dev/null 2>&1 && fail "--only with an unknown check was accepted"

# 2. The kit's logic on a made-up build folder.
fake=$work/fake_build
mkdir -p "$fake"
cat >"$fake/build.ninja" <<'EOF'
rule tool
  command = printf '#!/bin/sh\necho tool ran: "$$@"\n' > $out && chmod +x $out
rule broken
  command = echo "broken.cpp:3:5: error: this target does not compile" >&2 && false
build tool_ok: tool
build tool_broken: broken
EOF
# No check starts with under 10 s left: "slow" starts well before 10 s in
# (the ones before it take about 4 s, twice that on a busy machine), "late"
# only after slow's 11 s.
"$kit" --cpu --reuse-build --build-dir "$fake" --out "$work/report" --deadline 20 --only passes,fails,hangs,unbuilt,slow,late \
  --also 'passes|20|tool_ok|./tool_ok hello' \
  --also 'fails|20|tool_ok|./tool_ok; exit 3' \
  --also 'hangs|2|tool_ok|sleep 60' \
  --also 'unbuilt|20|tool_broken|./tool_broken' \
  --also 'slow|20|tool_ok|sleep 11' \
  --also 'late|20|tool_ok|./tool_ok' >"$work/run.out" 2>&1
rc=$?
((rc != 0)) || fail "the kit exited 0 with failing checks"
report=$work/report/report.md
[ -f "$report" ] || { fail "no report.md"; cat "$work/run.out"; exit 1; }
expect_line "$report" '^\| passes \| passed \| [0-9]+ \|' "a check that exits 0"
expect_line "$report" '^\| fails \| failed \(exit 3\) \|' "a check that exits 3"
expect_line "$report" '^\| hangs \| timed out after 2s \| [2-7] \|' "a check past its box, stopped within it"
expect_line "$report" '^\| unbuilt \| not built \(tool_broken\) \|' "a check whose target failed to compile"
expect_line "$report" '^\| slow \| passed \|' "the run goes on after a failure, a time-out and a missing target"
expect_line "$report" '^\| late \| not run: past the 20s deadline \|' "no check starts past the deadline"
expect_line "$report" '^- targets built: tool_ok \(of ' "the targets that built"
expect_line "$report" '^    tool ran: hello$' "the output's tail of each check"
expect_line "$work/report/logs/build_errors.log" 'broken.cpp:3:5: error' "the compiler's error kept"
expect_line "$report" '^- total: [0-9]+ s; 4 check\(s\) not passed' "the count of checks not passed"

# 3. Two real checks in their CPU form, in this build.
"$kit" --cpu --reuse-build --build-dir "$build" --out "$work/real" --only cuda_tests,nccl_two_ranks_refused \
  >"$work/real.out" 2>&1 || fail "the CPU form of cuda_tests and nccl_two_ranks_refused did not pass: $(cat "$work/real.out")"
expect_line "$work/real/report.md" '^\| cuda_tests \| not run: needs a GPU \|' "a CUDA-only check on the CPU"
expect_line "$work/real/report.md" '^\| nccl_two_ranks_refused \| passed \(refused, exit [1-9][0-9]*\) \|' \
  "nccl refused without a GPU"
expect_line "$work/real/logs/nccl_two_ranks_refused.log" 'the nccl backend needs a GPU' "the refusal's words"

((failed == 0)) && echo "gpu_check.sh: dry run, CPU form and its own logic as expected"
exit $failed
