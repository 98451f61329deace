#!/usr/bin/env bash
# scripts/hw-check.sh [OUTDIR]: gather the hardware evidence on a machine that may have
# counters (a larger machine lent for a few minutes, a bare-metal box). Our own machines are
# VMs without a PMU, so this is where the hardware paths meet real counters.
#
# It says whether there is a PMU, runs the hardware-only tests, `tma doctor --verify`,
# `tma stat -l 3` on the bundled workloads (sha256 portable and ni, dram, matmul with THP off
# and on), `tma locate` with the locate-with event and `tma bench --clock perf` beside
# `--clock tsc`, and writes what they printed under OUTDIR (default: $OUT, else ./hw-check-out):
#   summary.txt   one page: the machine, the PMU, one line per step (ok / failed / skipped)
#   details.log   every step's command and full output
# Two files only, so that a device tool that brings back few files brings back all of it.
#
# The binary: $TMA if set, else a release build with cargo (where cargo exists), else
# target/release/tma if it was built elsewhere and carried here. The hardware-only tests run
# with cargo, or from test executables carried into $TMA_TEST_BINS; else they are skipped
# with the reason. Every step has its own time limit, and
# the whole script stays within 8 minutes including the build on 16 cores.
set -uo pipefail
cd "$(dirname "$0")/.."

out=${1:-${OUT:-hw-check-out}}
mkdir -p "$out"
summary=$out/summary.txt
details=$out/details.log
: >"$summary"
: >"$details"
start=$(date +%s)

say() { echo "$*" | tee -a "$summary"; }
# step NAME LIMIT_S CMD...: run CMD with a time limit, log it, one summary line.
step() {
  local name=$1 limit=$2
  shift 2
  {
    echo
    echo "===== $name: $*"
  } >>"$details"
  local t0 rc ms
  t0=$(date +%s%N)
  timeout --kill-after=5 "$limit" "$@" >"$out/.step.log" 2>&1
  rc=$?
  ms=$((($(date +%s%N) - t0) / 1000000))
  cat "$out/.step.log" >>"$details"
  case $rc in
    0) say "ok      $name ($((ms / 1000)).$((ms % 1000 / 100)) s)" ;;
    124 | 137) say "TIMEOUT $name (over ${limit} s)" ;;
    *)
      say "FAILED  $name (exit $rc after $((ms / 1000)) s):"
      say "          $(grep -v '^\s*$' "$out/.step.log" | tail -1 | cut -c1-200)"
      ;;
  esac
  rm -f "$out/.step.log"
  echo "----- exit $rc" >>"$details"
  return 0
}
skip() { say "skipped $1: $2"; }

say "tma hw-check, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) CPUs, kernel $(uname -r)"
grep -qw hypervisor /proc/cpuinfo && say "virtual machine: yes (hypervisor flag)" || say "virtual machine: no hypervisor flag"

# ---- is there a PMU?
pmus=$(ls /sys/bus/event_source/devices 2>/dev/null | tr '\n' ' ')
say "PMUs in sysfs: ${pmus:-none}"
core_pmu=no
for p in cpu cpu_core cpu_atom armv8_pmuv3_0; do
  [ -e "/sys/bus/event_source/devices/$p" ] && core_pmu=yes
done
ls /sys/bus/event_source/devices 2>/dev/null | grep -q '^armv8' && core_pmu=yes
say "core PMU in sysfs: $core_pmu"
say "perf_event_paranoid: $(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo unreadable), nmi_watchdog: $(cat /proc/sys/kernel/nmi_watchdog 2>/dev/null || echo unreadable)"
if command -v perf >/dev/null 2>&1; then
  perf_out=$(perf stat -x, -e instructions,cycles true 2>&1)
  echo "$perf_out" >>"$details"
  if echo "$perf_out" | grep -q 'not supported\|not counted'; then
    say "perf stat -e instructions true: not supported"
  else
    say "perf stat -e instructions true: $(echo "$perf_out" | grep instructions | cut -d, -f1) instructions"
  fi
else
  say "perf stat -e instructions true: skipped (no perf binary here)"
fi

# ---- the binary
TMA=${TMA:-}
if [ -z "$TMA" ]; then
  if command -v cargo >/dev/null 2>&1; then
    step "cargo build --release" 300 cargo build --release --locked
  fi
  [ -x target/release/tma ] && TMA=$PWD/target/release/tma
fi
if [ -z "$TMA" ] || [ ! -x "$TMA" ]; then
  say "no tma binary (no cargo, and no target/release/tma carried here): nothing more to run"
  exit 1
fi
say "tma: $TMA ($("$TMA" --version 2>&1))"

# ---- hardware-only tests (they skip with the reason where there is no PMU)
if command -v cargo >/dev/null 2>&1; then
  step "hardware tests: tma-perf live_software pmu_" 150 \
    cargo test --release --locked -p tma-perf --test live_software pmu_ -- --show-output
  step "hardware tests: tma-cli stat_live pmu_" 150 \
    cargo test --release --locked -p tma-cli --test stat_live pmu_ -- --show-output
  step "hardware tests: tma-doctor verify live_verify_hardware" 150 \
    cargo test --release --locked -p tma-doctor --test verify live_verify_hardware -- --show-output
  grep -h "skipped:" "$details" | sort -u | sed 's/^ */  /' | tee -a "$summary" >/dev/null
elif [ -n "${TMA_TEST_BINS:-}" ] && [ -d "$TMA_TEST_BINS" ]; then
  # Test executables built elsewhere (`cargo test --no-run`) and carried here.
  for t in "live_software pmu_" "verify live_verify_hardware"; do
    set -- $t
    if [ -x "$TMA_TEST_BINS/$1" ]; then
      step "hardware tests: $1 $2 (carried binary)" 150 "$TMA_TEST_BINS/$1" "$2" --show-output
    else
      skip "hardware tests: $1" "not among the carried test binaries in $TMA_TEST_BINS"
    fi
  done
  grep -h "skipped:" "$details" | sort -u | sed 's/^ */  /' | tee -a "$summary" >/dev/null
else
  skip "hardware tests" "no cargo on this machine and no TMA_TEST_BINS (carry test binaries built with cargo test --no-run)"
fi

# ---- tma itself
step "tma doctor" 30 "$TMA" doctor
step "tma doctor --verify" 120 "$TMA" doctor --verify
w="$TMA workload"
step "tma stat -l 3 (sha256 portable)" 60 "$TMA" stat -l 3 -- $w sha256 --impl portable --size 1M --iters 64 --no-calibrate
if grep -qw sha_ni /proc/cpuinfo; then
  step "tma stat -l 3 (sha256 ni)" 60 "$TMA" stat -l 3 -- $w sha256 --impl ni --size 1M --iters 256 --no-calibrate
else
  skip "tma stat -l 3 (sha256 ni)" "no sha_ni flag in /proc/cpuinfo"
fi
step "tma stat -l 3 (dram)" 60 "$TMA" stat -l 3 -- $w dram --accesses 5000000 --no-calibrate
step "tma stat -l 3 (dram --prefetch)" 60 "$TMA" stat -l 3 -- $w dram --accesses 5000000 --prefetch --no-calibrate
step "tma stat -l 3 (matmul --thp off)" 90 "$TMA" stat -l 3 -- $w matmul --thp off --no-calibrate
step "tma stat -l 3 (matmul --thp on)" 90 "$TMA" stat -l 3 -- $w matmul --thp on --no-calibrate
step "tma locate (dram, the bottleneck's locate-with event)" 60 "$TMA" locate -- $w dram --accesses 5000000 --no-calibrate
step "tma bench --clock tsc (imul: latency 3, throughput 1)" 60 "$TMA" bench --clock tsc 'imul rax, rbx'
step "tma bench --clock perf (imul: latency 3, throughput 1)" 60 "$TMA" bench --clock perf 'imul rax, rbx'

# ---- the headline figures, pulled from the details
{
  echo
  echo "bottlenecks (the <== line of each tree):"
  awk '/^===== /{name=$0} /<==/{sub(/^===== /,"",name); print "  " substr(name,1,60) " | " $0}' "$details"
  echo "bench figures:"
  awk '/^===== tma bench/{on=1; print "  " $0; next} /^===== /{on=0} on && /(->|throughput|error)/{print "    " $0}' "$details"
} | tee -a "$summary" >/dev/null
say "finished in $(($(date +%s) - start)) s; full output in $details"
