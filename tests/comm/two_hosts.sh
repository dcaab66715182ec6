#!/usr/bin/env bash
# Runs a DistLab job on two hosts made on this machine, for tests that must
# tell ranks on the same host from ranks on another one. Each host is a
# network namespace of its own (joined to the other by a veth pair), a UTS
# namespace with its own host name (distlab-host0, distlab-host1) and its own
# /dev/shm; on each, distlab-run starts node 0 or node 1 of the job.
#
#   tests/comm/two_hosts.sh [--nproc-per-node N] [--timeout S] -- PROGRAM ARGS...
#
#   --nproc-per-node N  ranks per host (default 1): host0 runs ranks 0..N-1
#   --timeout S         seconds before both hosts are stopped (default 120)
#   DISTLAB_RUN         the launcher (default: distlab-run on PATH)
#
# Prints each host's output (stdout and stderr, in order) under "== host0 =="
# and "== host1 ==", then exits with the code of the first host to fail
# (124 on timeout), 0 when both succeed. Exits 77 with one line on stderr
# when this machine cannot make the hosts (not root, no unshare or ip, no
# namespaces or veth), so that a test can skip; 2 on bad usage.
set -euo pipefail

skip() { echo "two_hosts: skipped: $*" >&2; exit 77; }
usage() { echo "two_hosts: $*; usage: $0 [--nproc-per-node N] [--timeout S] -- PROGRAM ARGS..." >&2; exit 2; }

nproc=1 timeout=120
while (($#)); do
  case $1 in
    --nproc-per-node) nproc=${2:-}; shift 2 || usage "--nproc-per-node needs a value" ;;
    --timeout) timeout=${2:-}; shift 2 || usage "--timeout needs a value" ;;
    --) shift; break ;;
    -*) usage "unknown option '$1'" ;;
    *) break ;;
  esac
done
(($#)) || usage "no program given"
[[ $nproc =~ ^[1-9][0-9]*$ ]] || usage "--nproc-per-node must be a positive integer, not '$nproc'"
[[ $timeout =~ ^[1-9][0-9]*$ ]] || usage "--timeout must be a positive number of seconds, not '$timeout'"
launcher=$(command -v "${DISTLAB_RUN:-distlab-run}") ||
  usage "launcher '${DISTLAB_RUN:-distlab-run}' not found (set DISTLAB_RUN)"

((EUID == 0)) || skip "needs root to create network and UTS namespaces"
for tool in ip unshare; do command -v "$tool" > /dev/null || skip "no '$tool' command"; done
unshare --uts true 2> /dev/null || skip "cannot create a UTS namespace"

# Names carry this shell's pid so that runs at the same time do not collide.
# The addresses and the master port live inside the namespaces, so they
# cannot clash with another run or with this machine's own network.
ns=("dlh0-$$" "dlh1-$$")
subnet="10.213.$(($$ % 250))"
master_port=29500
work=$(mktemp -d)
declare -A host_of=()  # pid of a running host's launcher -> host index
timer=""

# shellcheck disable=SC2317  # run by the trap
cleanup() {
  set +e
  local pid n
  for pid in "${!host_of[@]}" $timer; do kill -KILL "$pid" && wait "$pid"; done 2> /dev/null
  for n in "${ns[@]}"; do ip netns delete "$n"; done 2> /dev/null
  rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Two namespaces, a veth pair straight between them, one address on each end.
for n in "${ns[@]}"; do
  ip netns delete "$n" 2> /dev/null || true  # left by a killed run whose pid this one reuses
  err=$(ip netns add "$n" 2>&1) || skip "cannot create a network namespace: $err"
done
err=$(ip link add dlveth0 netns "${ns[0]}" type veth peer name dlveth1 netns "${ns[1]}" 2>&1) ||
  skip "cannot create a veth pair: $err"
for i in 0 1; do
  ip -n "${ns[i]}" address add "$subnet.$((i + 1))/24" dev "dlveth$i"
  ip -n "${ns[i]}" link set lo up
  ip -n "${ns[i]}" link set "dlveth$i" up
done
for i in 0 1; do  # the pair is up once both ends are (a moment)
  for _ in {1..50}; do
    [[ $(ip -n "${ns[i]}" -brief link show "dlveth$i") == *" UP "* ]] && break
    sleep 0.1
  done
done

# One launcher per host, node i of 2, all ranks meeting at host0's address.
# `ip netns exec` gives the command a mount namespace of its own, where a
# fresh tmpfs on /dev/shm keeps each host's shared memory apart. Gloo binds
# to the veth (GLOO_SOCKET_IFNAME): the host names resolve nowhere. Every
# step execs, so $! is the launcher itself.
for i in 0 1; do
  # shellcheck disable=SC2016  # $0 and $@ are the inner shell's
  GLOO_SOCKET_IFNAME="dlveth$i" ip netns exec "${ns[i]}" unshare --uts \
    sh -c 'hostname "$0" && mount -t tmpfs tmpfs /dev/shm && exec "$@"' "distlab-host$i" \
    "$launcher" --nnodes 2 --node-rank "$i" --nproc-per-node "$nproc" \
    --master-addr "$subnet.1" --master-port "$master_port" -- "$@" \
    < /dev/null > "$work/host$i" 2>&1 &
  host_of[$!]=$i
done

# Wait for both. A timer stops them: at the timeout, or 10 s after the first
# host fails (the other host's ranks usually fail on their own by then).
# Stopping is SIGTERM (the launcher stops its ranks), then SIGKILL 10 s later.
sleep "$timeout" & timer=$!
status=0 stopping=0
while ((${#host_of[@]})); do
  rc=0
  wait -n -p ended "${!host_of[@]}" "$timer" || rc=$?
  if [[ $ended == "$timer" ]]; then
    if ((stopping)); then
      kill -KILL "${!host_of[@]}" 2> /dev/null || true
    else
      ((status)) || { echo "two_hosts: timed out after ${timeout} s; stopping both hosts" >&2; status=124; }
      kill -TERM "${!host_of[@]}" 2> /dev/null || true
      stopping=1
    fi
    sleep 10 & timer=$!
    continue
  fi
  i=${host_of[$ended]}
  unset "host_of[$ended]"
  if ((rc)); then
    echo "two_hosts: host$i exited with code $rc" >&2
    if ((!status)); then
      status=$rc
      kill "$timer" 2> /dev/null || true
      sleep 10 & timer=$!
    fi
  fi
done

for i in 0 1; do
  echo "== host$i =="
  cat "$work/host$i"
done
exit "$status"
