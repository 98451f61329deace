#!/usr/bin/env bash
# Benchmark: samples processed per second by `tma locate --import` versus `perf report --stdio`
# on the same large perf.data, reported as a ratio (both measured in this run, same machine).
#
# Usage: scripts/bench-locate.sh [SECONDS] [FREQ_HZ]   (default 30 s at 20000 Hz)
# Env:   TMA=path/to/tma (default: a release build in $CARGO_TARGET_DIR or target/)
#        KEEP=1 keeps the work directory.
set -euo pipefail

SECS=${1:-30}
FREQ=${2:-20000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=$(mktemp -d /tmp/bench-locate.XXXXXX)
[[ "${KEEP:-}" == 1 ]] || trap 'rm -rf "$WORK"' EXIT

command -v perf >/dev/null || { echo "perf not installed: nothing to compare with" >&2; exit 1; }
command -v cc >/dev/null || { echo "no C compiler for the workload" >&2; exit 1; }

if [[ -z "${TMA:-}" ]]; then
    (cd "$ROOT" && cargo build --release -q -p tma-cli)
    TMA="${CARGO_TARGET_DIR:-$ROOT/target}/release/tma"
fi

MAX=$(cat /proc/sys/kernel/perf_event_max_sample_rate 2>/dev/null || echo "$FREQ")
if (( FREQ > MAX )); then
    echo "note: $FREQ Hz is above perf_event_max_sample_rate ($MAX); using $MAX" >&2
    FREQ=$MAX
fi

cc -O1 -g -fno-omit-frame-pointer -o "$WORK/chase" "$ROOT/tests/fixtures/locate/chase.c"
echo "recording ${SECS}s of cpu-clock at ${FREQ} Hz (call graphs) ..." >&2
# The workload runs until killed; perf stops after SECS.
perf record -q -e cpu-clock -F "$FREQ" -g -o "$WORK/big.perf.data" -- \
    timeout "$SECS" "$WORK/chase" 64 100000000000 >/dev/null 2>&1 || true
# (perf report abbreviates the count, "69K": take the exact number from tma's JSON.)
SAMPLES=$("$TMA" locate --import "$WORK/big.perf.data" --json 2>/dev/null |
    awk -F'[:,]' '!done && /"samples":/{gsub(/ /, "", $2); print $2; done=1}')
SIZE=$(stat -c %s "$WORK/big.perf.data")
echo "file: $((SIZE / 1024)) KiB, samples: $SAMPLES" >&2

# Best of 3 wall-clock runs each.
best() {
    local best=""
    for _ in 1 2 3; do
        local t0 t1
        t0=$(date +%s.%N)
        "$@" >/dev/null 2>&1
        t1=$(date +%s.%N)
        local d
        d=$(echo "$t1 - $t0" | bc -l)
        if [[ -z "$best" ]] || (( $(echo "$d < $best" | bc -l) )); then best=$d; fi
    done
    echo "$best"
}

T_TMA=$(best "$TMA" locate --import "$WORK/big.perf.data" --symdir "$WORK")
T_PERF=$(best perf report --stdio -i "$WORK/big.perf.data" --no-children --sort symbol -g none)
T_TMA_G=$(best "$TMA" locate --import "$WORK/big.perf.data" --symdir "$WORK" --folded)
T_PERF_G=$(best perf report --stdio -i "$WORK/big.perf.data" --no-children --sort symbol -g caller)

rate() { echo "$SAMPLES / $1" | bc -l | xargs printf '%.0f'; }
printf '%-44s %10s %14s\n' "tool (best of 3)" "seconds" "samples/s"
printf '%-44s %10.3f %14s\n' "tma locate --import (flat + annotate)" "$T_TMA" "$(rate "$T_TMA")"
printf '%-44s %10.3f %14s\n' "perf report --stdio -g none" "$T_PERF" "$(rate "$T_PERF")"
printf '%-44s %10.3f %14s\n' "tma locate --import --folded (stacks)" "$T_TMA_G" "$(rate "$T_TMA_G")"
printf '%-44s %10.3f %14s\n' "perf report --stdio -g caller" "$T_PERF_G" "$(rate "$T_PERF_G")"
printf 'ratio tma/perf (samples/s), flat:   %.2fx\n' "$(echo "$T_PERF / $T_TMA" | bc -l)"
printf 'ratio tma/perf (samples/s), stacks: %.2fx\n' "$(echo "$T_PERF_G / $T_TMA_G" | bc -l)"
