#!/usr/bin/env bash
# One command that checks every GPU path of DistLab on a lent GPU machine
# and says what it saw (docs/gpu.md).
#
#   scripts/gpu_check.sh --prepare   here, before a GPU is lent: the header-only
#                                    Debian packages the build needs (and cmake,
#                                    ninja, gloo's headers, in case the GPU
#                                    machine lacks them), unpacked in .gpu-kit/
#   scripts/gpu_check.sh             on the GPU machine, in the repository root:
#                                    configure against the CUDA LibTorch of its
#                                    python3's PyTorch, build the checks' targets
#                                    with every core, run each check in its time
#                                    box, write report.md and logs into $OUT
#   scripts/gpu_check.sh --dry-run   the steps, targets and time boxes, nothing run
#   scripts/gpu_check.sh --cpu       the same targets against Debian's LibTorch,
#                                    each check in its CPU form (both sides of
#                                    every comparison on the CPU, nccl's refusal
#                                    without a GPU): a missing target or a broken
#                                    step is found here, not on the device
#
# Options: --out DIR (default $OUT, else gpu-check-report), --build-dir DIR
# (default build-gpu, or build-gpu-cpu with --cpu), --reuse-build (build in
# an already configured folder, configure nothing), --jobs N (default: every
# core), --deadline S (no check starts later than S seconds after the start,
# default 540, as a device command may run 600; 7200 with --cpu, where the
# build alone takes longer on 2 cores), --only NAME[,NAME...] (these
# checks only), --also 'NAME|SECONDS|TARGETS|COMMAND' (one more check, run
# as written, before the others; for the kit's own test).
#
# A step that fails does not stop the run: a target that does not compile
# costs the checks that need it ("not built"), a check that fails or runs
# past its box costs itself. The report is rewritten after every check, so
# a run stopped from outside still leaves what it saw.
set -uo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
started=$(date +%s)

mode=gpu dry_run=0 prepare=0 reuse=0 jobs=$(nproc) deadline="" only="" build_dir="" out="${OUT:-}"
also=()
while (($#)); do
  case "$1" in
    --cpu) mode=cpu ;;
    --dry-run) dry_run=1 ;;
    --prepare) prepare=1 ;;
    --reuse-build) reuse=1 ;;
    --jobs) jobs=$2; shift ;;
    --deadline) deadline=$2; shift ;;
    --only) only=$2; shift ;;
    --also) also+=("$2"); shift ;;
    --build-dir) build_dir=$2; shift ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "gpu_check: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$build_dir" ] || build_dir=$([ $mode = cpu ] && echo build-gpu-cpu || echo build-gpu)
[ -n "$out" ] || out=gpu-check-report
[ -n "$deadline" ] || deadline=$([ $mode = cpu ] && echo 7200 || echo 540)
kit=$repo/.gpu-kit
case "$jobs$deadline" in *[!0-9]*) echo "gpu_check: --jobs and --deadline take whole numbers" >&2; exit 2 ;; esac

# ------------------------------------------------------------- prepare
# Debian packages whose contents the build reads as files (headers, CMake
# configurations, GoogleTest's static libraries), and cmake, ninja and
# their libraries for a machine without them: downloaded here, where
# Debian's mirror is reachable, and unpacked under .gpu-kit/prefix, which
# the device command carries (`carry: [".gpu-kit"]`).
kit_packages=(libcli11-dev nlohmann-json3-dev libgtest-dev libgmock-dev libgloo-dev
              ninja-build cmake cmake-data libjsoncpp25 librhash0 libuv1 libarchive13)
if ((prepare)); then
  debs=$(mktemp -d) && chmod 755 "$debs" && cd "$debs" || exit 1
  apt-get download "${kit_packages[@]}" || { echo "gpu_check: apt-get download failed" >&2; exit 1; }
  rm -rf "$kit/prefix" && mkdir -p "$kit/prefix"
  for deb in ./*.deb; do dpkg -x "$deb" "$kit/prefix"; done
  cd "$repo" && rm -rf "$debs"
  # What the build does not read: a device command carries 64 MiB in all.
  rm -rf "$kit"/prefix/usr/share/{doc,man} "$kit"/prefix/usr/bin/{cpack,ctest}
  du -sh "$kit" | sed 's/^/gpu_check: prepared /'
  exit 0
fi

# -------------------------------------------------------------- targets
# Each target the checks need, and where its file lands in the build folder
# (a name not listed here is a path in the build folder, as ninja takes it).
declare -A target_path=(
  [distlab-run]=launcher/distlab-run
  [distlab-bench]=bench/distlab-bench
  [lesson_11_capstone]=lessons/lesson_11_capstone
  [gpu_tests]=tests/gpu/gpu_tests
  [comm_tests]=tests/comm/comm_tests
  [comm_gloo_worker]=tests/comm/comm_gloo_worker
)

# --------------------------------------------------------------- checks
# check NAME SECONDS "TARGETS" "GPU COMMAND" "CPU COMMAND" EXPECT "WHAT"
#   EXPECT: ok (exit 0), or refused:TEXT (a non-zero exit whose output says TEXT),
#   or refused:TEXT||CPU TEXT (what the CPU form must say instead);
#   CPU COMMAND "-": nothing to run without a GPU (reported as such).
# Commands run in the build folder, with B=the build folder.
names=() boxes=() needs=() gpu_cmds=() cpu_cmds=() expects=() whats=()
check() {
  names+=("$1") boxes+=("$2") needs+=("$3") gpu_cmds+=("$4") cpu_cmds+=("$5") expects+=("$6") whats+=("$7")
}
collectives() {  # every collective, every algorithm, checked element by element against the CPU's reference
  local device=$1 e=$2
  echo "for c in broadcast reduce all_reduce reduce_scatter all_gather; do" \
       "bench/distlab-bench collective --backend threads --ranks 4 --device $device --collective \$c" \
       "--algorithm all -b 1K -e $e -f 8 -n 2 -w 1 -c 1 || exit 1; done"
}
check cuda_tests 60 "comm_tests" \
  "tests/comm/comm_tests --gtest_filter='Threads.CudaTensors'" \
  "-" ok "the CUDA tests of the library's own suites (thread ranks moving CUDA tensors)"
check collectives_threads 120 "distlab-bench" \
  "$(collectives cuda 64M)" "$(collectives cpu 1M)" ok \
  "4 thread ranks sharing the GPU: every collective and algorithm, #wrong against the CPU's reference"
check nccl_one_rank 60 "distlab-run comm_gloo_worker" \
  "launcher/distlab-run --nproc-per-node 1 --master-port 0 -- tests/comm/comm_gloo_worker --scenario exchange --backend nccl" \
  "-" ok "nccl in one process (all one GPU allows)"
check nccl_two_ranks_refused 60 "distlab-run comm_gloo_worker" \
  "launcher/distlab-run --nproc-per-node 2 --master-port 0 -- tests/comm/comm_gloo_worker --scenario exchange --backend nccl" \
  "launcher/distlab-run --nproc-per-node 2 --master-port 0 -- tests/comm/comm_gloo_worker --scenario exchange --backend nccl" \
  "refused:NCCL refuses two ranks on one GPU||the nccl backend needs a GPU" \
  "nccl refuses a second rank on the same GPU, pointing to --backend threads (without a GPU: refuses the first)"
check layouts 150 "gpu_tests" \
  "tests/gpu/gpu_tests --gtest_filter='GpuTraining.EveryLayout*'" \
  "DISTLAB_GPU_TESTS_ON_CPU=1 tests/gpu/gpu_tests --gtest_filter='GpuTraining.EveryLayout*'" ok \
  "DDP, ZeRO-1/2, every pipeline schedule, 2x2 on the GPU against the CPU; tensor, context, experts, ZeRO-3 refused on a shared GPU"
check recompute 90 "gpu_tests" \
  "tests/gpu/gpu_tests --gtest_filter='GpuTraining.Recomputation*:GpuLayer.*'" \
  "DISTLAB_GPU_TESTS_ON_CPU=1 tests/gpu/gpu_tests --gtest_filter='GpuTraining.Recomputation*:GpuLayer.*'" ok \
  "recomputation (full, selective, matmuls) on the GPU bit for bit, dropout on"
check precision 90 "gpu_tests" \
  "tests/gpu/gpu_tests --gtest_filter='GpuPrecision.*'" \
  "DISTLAB_GPU_TESTS_ON_CPU=1 tests/gpu/gpu_tests --gtest_filter='GpuPrecision.*'" ok \
  "bf16 and fp16 products under CUDA's autocast against the CPU's (fp16: its emulation); the capstone in both"
check capstone_tutorial 150 "lesson_11_capstone" \
  "lessons/lesson_11_capstone --backend threads --ranks 4 --device cuda --preset tutorial --epochs 1 --batches-per-epoch 24 --eval-batches 2 --log-interval 8" \
  "lessons/lesson_11_capstone --backend threads --ranks 4 --preset tiny --epochs 1 --batches-per-epoch 6 --eval-batches 2 --log-interval 3" ok \
  "the capstone's tutorial preset, 2 stages x 2 replicas on 4 thread ranks sharing the GPU (ms/batch; MFU in fp32)"
check capstone_tutorial_bf16 120 "lesson_11_capstone" \
  "lessons/lesson_11_capstone --backend threads --ranks 4 --device cuda --preset tutorial --precision bf16 --epochs 1 --batches-per-epoch 16 --eval-batches 2 --log-interval 8" \
  "lessons/lesson_11_capstone --backend threads --ranks 4 --preset tiny --precision bf16 --epochs 1 --batches-per-epoch 6 --eval-batches 2 --log-interval 3" ok \
  "the same in bf16 (MFU against the bf16 matmul peak measured there)"
for ((k = ${#also[@]} - 1; k >= 0; k--)); do  # in front, in the order given
  IFS='|' read -r a_name a_box a_targets a_cmd <<<"${also[$k]}"
  case "$a_box" in ''|*[!0-9]*) echo "gpu_check: --also '${also[$k]}': NAME|SECONDS|TARGETS|COMMAND" >&2; exit 2 ;; esac
  names=("$a_name" "${names[@]}") boxes=("$a_box" "${boxes[@]}") needs=("$a_targets" "${needs[@]}")
  gpu_cmds=("$a_cmd" "${gpu_cmds[@]}") cpu_cmds=("$a_cmd" "${cpu_cmds[@]}") expects=(ok "${expects[@]}")
  whats=("(--also) $a_cmd" "${whats[@]}")
done
# The planner's calibration joins here once distlab-plan exists.

selected=()
for i in "${!names[@]}"; do
  if [ -z "$only" ] || [[ ",$only," == *",${names[$i]},"* ]]; then selected+=("$i"); fi
done
if [ -n "$only" ]; then
  for n in ${only//,/ }; do
    [[ " ${names[*]} " == *" $n "* ]] || { echo "gpu_check: no check named '$n' (${names[*]})" >&2; exit 2; }
  done
fi
targets=()
for i in "${selected[@]}"; do
  for t in ${needs[$i]}; do [[ " ${targets[*]} " == *" $t "* ]] || targets+=("$t"); done
done

command_of() { [ $mode = cpu ] && echo "${cpu_cmds[$1]}" || echo "${gpu_cmds[$1]}"; }
expect_of() {
  local e=${expects[$1]}
  [[ $e == *"||"* ]] || { echo "$e"; return; }
  [ $mode = cpu ] && echo "refused:${e#*||}" || echo "${e%%||*}"
}

if ((dry_run)); then
  echo "gpu_check --dry-run ($mode mode): build folder $build_dir, report into $out, $jobs jobs, no check after ${deadline}s"
  echo "step 1: configure $([ $reuse = 1 ] && echo "(skipped: --reuse-build)" ||
    ([ $mode = cpu ] && echo "against Debian's LibTorch" || echo "against python3's torch.utils.cmake_prefix_path")), visualizer off"
  echo "step 2: build, continuing past failures (ninja -k 0):"
  for t in "${targets[@]}"; do echo "  target $t -> $build_dir/${target_path[$t]:-$t}"; done
  echo "step 3: checks, each in its time box:"
  for i in "${selected[@]}"; do
    echo "  check ${names[$i]} (${boxes[$i]}s; needs ${needs[$i]}; expects $(expect_of "$i")): ${whats[$i]}"
    echo "    \$ $(command_of "$i")"
  done
  echo "step 4: report: $out/report.md, logs in $out/logs/"
  exit 0
fi

# --------------------------------------------------------------- report
mkdir -p "$out/logs" || exit 1
out=$(cd "$out" && pwd)
statuses=() seconds=()
for i in "${!names[@]}"; do statuses[$i]="not run"; seconds[$i]=""; done
facts=()  # "name: value" lines about the machine and the build
fact() { facts+=("$1: $2"); }

write_report() {
  {
    echo "# DistLab GPU check ($mode mode), $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo
    for f in "${facts[@]}"; do echo "- $f"; done
    echo
    echo "| check | status | seconds | what |"
    echo "|---|---|---|---|"
    for i in "${selected[@]}"; do
      echo "| ${names[$i]} | ${statuses[$i]} | ${seconds[$i]} | ${whats[$i]} |"
    done
    for i in "${selected[@]}"; do
      [ -f "$out/logs/${names[$i]}.log" ] || continue
      echo
      echo "## ${names[$i]}: ${statuses[$i]}"
      echo
      echo "    \$ $(command_of "$i")"
      tail -n 30 "$out/logs/${names[$i]}.log" | sed 's/^/    /'
    done
  } >"$out/report.md"
}
elapsed() { echo $(($(date +%s) - started)); }

fact "machine" "$(hostname), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
if [ $mode = gpu ]; then
  if command -v nvidia-smi >/dev/null 2>&1; then
    fact "device" "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -n 4 | paste -sd ';')"
  else
    fact "device" "no nvidia-smi on this machine"
  fi
fi
fact "compiler" "$(c++ --version 2>&1 | head -n 1)"

# --------------------------------------------------------- tools, torch
# cmake and ninja from the kit when the machine has none.
for tool in cmake ninja; do
  if ! command -v $tool >/dev/null 2>&1 && [ -x "$kit/prefix/usr/bin/$tool" ]; then
    export PATH="$kit/prefix/usr/bin:$PATH"
    export LD_LIBRARY_PATH="$kit/prefix/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  fi
done
fact "cmake" "$(command -v cmake || echo missing) $(cmake --version 2>/dev/null | head -n 1)"
fact "ninja" "$(command -v ninja || echo missing) $(ninja --version 2>/dev/null)"

configure_args=(-G Ninja -DDISTLAB_WITH_VIZ=OFF)
if [ $mode = gpu ]; then
  py=python3
  torch_facts=$($py - 2>&1 <<'EOF'
import importlib.util, os, torch
print("version", torch.__version__)
print("prefix", torch.utils.cmake_prefix_path)
print("cuda", torch.version.cuda, torch.cuda.is_available())
print("include", os.path.join(os.path.dirname(torch.__file__), "include"))
spec = importlib.util.find_spec("nvidia.nccl")
if spec and spec.submodule_search_locations:
    print("nccl", list(spec.submodule_search_locations)[0])
try:
    print("nccl_version", ".".join(map(str, torch.cuda.nccl.version())))
except Exception as e:
    print("nccl_version", "unknown:", e)
EOF
)
  echo "$torch_facts" >"$out/logs/torch.log"
  get() { echo "$torch_facts" | sed -n "s/^$1 //p" | head -n 1; }
  torch_version=$(get version)
  fact "PyTorch" "$torch_version (CUDA $(get cuda | cut -d' ' -f1), available: $(get cuda | cut -d' ' -f2); NCCL $(get nccl_version))"
  configure_args+=("-DCMAKE_PREFIX_PATH=$(get prefix);$kit/prefix/usr" -DDISTLAB_LOAD_ORDER=OFF
                   -DCMAKE_CUDA_ARCHITECTURES=90 -DTORCH_CUDA_ARCH_LIST=9.0)
  [ -d /usr/local/cuda ] && configure_args+=(-DCUDAToolkit_ROOT=/usr/local/cuda)
  # ATen demands C++20 from LibTorch 2.12 on (its headers' #error); 2.11 and older take C++17.
  case "$torch_version" in 2.[0-9].*|2.1[01].*|1.*) ;; *) configure_args+=(-DCMAKE_CXX_STANDARD=20) ;; esac
  # The NCCL the wheel's LibTorch loads, so that one libnccl.so.2 serves both.
  nccl_dir=$(get nccl)
  if [ -n "$nccl_dir" ] && [ -f "$nccl_dir/include/nccl.h" ]; then
    configure_args+=("-DNCCL_INCLUDE_DIR=$nccl_dir/include" "-DNCCL_LIBRARY=$(ls "$nccl_dir"/lib/libnccl.so* | head -n 1)")
  fi
  # ProcessGroupGloo.hpp includes gloo's headers; a wheel without them gets
  # Debian's, after its own. Its declarations stand behind USE_C10D_GLOO,
  # which LibTorch's CMake files pass on to its users: where they do not,
  # the kit does.
  cxx_flags=""
  [ -d "$(get include)/gloo" ] || cxx_flags+=" -idirafter $kit/prefix/usr/include"
  grep -rqs USE_C10D_GLOO "$(get prefix)" || cxx_flags+=" -DUSE_C10D_GLOO -DUSE_DISTRIBUTED"
  [ -z "$cxx_flags" ] || configure_args+=("-DCMAKE_CXX_FLAGS=${cxx_flags# }")
  fact "LibTorch's gloo" "headers $([ -d "$(get include)/gloo" ] && echo "in the wheel" || echo "from the kit"), USE_C10D_GLOO $(grep -rqs USE_C10D_GLOO "$(get prefix)" && echo "from LibTorch's CMake files" || echo "added by the kit")"
  for dir in "$kit"/prefix/usr/lib/x86_64-linux-gnu/cmake/GTest "$kit"/prefix/usr/share/cmake/CLI11 \
             "$kit"/prefix/usr/share/cmake/nlohmann_json; do
    [ -d "$dir" ] || continue
    name=$(basename "$dir"); configure_args+=("-D${name}_DIR=$dir")
  done
else
  fact "LibTorch" "Debian's ($(dpkg-query -W -f='${Version}' libtorch-dev 2>/dev/null || echo '?'))"
fi
write_report

# ---------------------------------------------------- configure, build
build_ok=1
if ((reuse)); then
  [ -f "$build_dir/build.ninja" ] || { echo "gpu_check: --reuse-build: $build_dir has no build.ninja (configure it first)" >&2; exit 2; }
  fact "configure" "skipped (--reuse-build: $build_dir)"
else
  t0=$(date +%s)
  if cmake -S . -B "$build_dir" "${configure_args[@]}" >"$out/logs/configure.log" 2>&1; then
    fact "configure" "$(($(date +%s) - t0)) s, $(grep -m1 'DistLab: LibTorch' "$out/logs/configure.log" | sed 's/^-- //')"
  else
    fact "configure" "FAILED after $(($(date +%s) - t0)) s (logs/configure.log): $(grep -m1 -A3 'CMake Error' "$out/logs/configure.log" | tr '\n' ' ' | cut -c1-300)"
    build_ok=0
  fi
fi
if ((build_ok)); then
  t0=$(date +%s)
  ninja -C "$build_dir" -j "$jobs" -k 0 "${targets[@]}" >"$out/logs/build.log" 2>&1
  rc=$?
  fact "build" "$(($(date +%s) - t0)) s with $jobs jobs, exit $rc; $(grep -c 'error:' "$out/logs/build.log") compiler error line(s) (logs/build.log)"
  grep -m 12 'error:' "$out/logs/build.log" >"$out/logs/build_errors.log"
fi
built=()
for t in "${targets[@]}"; do
  if [ -f "$build_dir/${target_path[$t]:-$t}" ]; then built+=("$t"); fi
done
fact "targets built" "${built[*]:-none} (of ${targets[*]})"
write_report

# ---------------------------------------------------------------- run
failures=0
for i in "${selected[@]}"; do
  name=${names[$i]} cmd=$(command_of "$i")
  missing=""
  for t in ${needs[$i]}; do [[ " ${built[*]} " == *" $t "* ]] || missing+="$t "; done
  if [ -n "$missing" ]; then
    statuses[$i]="not built (${missing% })"; failures=$((failures + 1)); write_report; continue
  fi
  if [ "$cmd" = "-" ]; then statuses[$i]="not run: needs a GPU"; write_report; continue; fi
  left=$((deadline - $(elapsed)))
  if ((left < 10)); then statuses[$i]="not run: past the ${deadline}s deadline"; failures=$((failures + 1)); write_report; continue; fi
  box=${boxes[$i]}
  ((box > left)) && box=$left
  echo "gpu_check: $name (box ${box}s)"
  t0=$(date +%s)
  (cd "$build_dir" && B=$(pwd) timeout --kill-after=5 "$box" bash -c "$cmd") >"$out/logs/$name.log" 2>&1 </dev/null
  rc=$?
  seconds[$i]=$(($(date +%s) - t0))
  log="$out/logs/$name.log"
  if ((rc == 124 || rc == 137)); then
    statuses[$i]="timed out after ${box}s"
  elif [[ $(expect_of "$i") == refused:* ]]; then
    text=$(expect_of "$i"); text=${text#refused:}
    if ((rc != 0)) && grep -qF -- "$text" "$log"; then statuses[$i]="passed (refused, exit $rc)"
    else statuses[$i]="failed (exit $rc; expected a refusal saying '$text')"; fi
  elif ((rc != 0)); then
    statuses[$i]="failed (exit $rc)"
  elif grep -q '^\[  PASSED  \] 0 tests' "$log" && grep -q '^\[  SKIPPED \]' "$log"; then
    statuses[$i]="skipped: $(grep -m1 -o 'Skipped.*\|no CUDA device[^)]*' "$log" | head -n 1)"
  else
    statuses[$i]="passed"
  fi
  [[ ${statuses[$i]} == passed* || ${statuses[$i]} == skipped* ]] || failures=$((failures + 1))
  echo "gpu_check: $name: ${statuses[$i]} (${seconds[$i]}s)"
  write_report
done

# What the class asks of the capstone: its speed beside the tutorial's, its MFU.
for name in capstone_tutorial capstone_tutorial_bf16; do
  log="$out/logs/$name.log"
  [ -f "$log" ] || continue
  line=$(grep 'ms/batch' "$log" | tail -n 1 | sed 's/^ *//')
  [ -n "$line" ] && fact "$name speed" "$line (the tutorial: about 700 ms/batch on four GPUs)"
  line=$(grep -m1 'MFU' "$log" | sed 's/^ *//')
  [ -n "$line" ] && fact "$name MFU" "$line"
done
fact "total" "$(elapsed) s; $failures check(s) not passed"
write_report
echo "gpu_check: report in $out/report.md ($failures check(s) not passed)"
((failures == 0))
