#!/usr/bin/env bash
# The overhead of one region (a begin/end pair) in each way in, against the same loop with no
# region calls (tests/fixtures/regions/bench_regions.c):
#
#   fifo            the control protocol by hand, acknowledged (tma reads the counters)
#   marker-fifo     tma-marker speaking the protocol (TMA_MARKER_MODE=fifo)
#   marker          tma-marker counting in process (two group reads per pair, no message)
#   marker-off      tma-marker not run under tma (its no-op)
#   read            no region: one read(2) of each group tma names, opened in the program as
#                   the marker opens them (the kernel's floor under `marker`, which reads once
#                   per pair in a loop of regions)
#
# Usage: scripts/bench-regions.sh [N_FIFO [N_INPROCESS]]     (defaults 20000, 1000000)
# PROFILE=debug uses the debug build (default: release); TMA_BIN=FILE and MARKER_LIB=DIR (holding
# libtma_marker.so) time another build instead (a saved copy, for before/after figures).
# OWN_THREAD=1 adds a row for the marker counting each thread alone (TMA_MARKER_OWN_THREAD=1:
# no inherited counters, rdpmc where allowed). STAY=1 adds the FIFO rows with `--no-follow`
# (tma's control thread left where the scheduler puts it, not on the program's CPU). RUNS=N
# runs each FIFO row N times and prints the median (default 1; the FIFO's cost varies from run
# to run on a virtual machine). Goals: FIFO <= 30 us per
# pair; in process <= 2 us with reads through the kernel (<= 100 ns with rdpmc, where the
# machine has a PMU that allows it).
set -euo pipefail
cd "$(dirname "$0")/.."
N_FIFO=${1:-20000}
N_IN=${2:-1000000}
PROFILE=${PROFILE:-release}
flag=()
[ "$PROFILE" = release ] && flag=(--release)
cargo build -q "${flag[@]}" -p tma-cli -p tma-marker
target=${CARGO_TARGET_DIR:-target}/$PROFILE
tma=${TMA_BIN:-$target/tma}
lib=${MARKER_LIB:-$target}
[ -f "$lib/libtma_marker.so" ] || lib=$target/deps
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O2 -o "$work/bench" tests/fixtures/regions/bench_regions.c \
    -I crates/tma-marker/include -L"$lib" -Wl,-rpath,"$lib" -ltma_marker

# ns per pair of one way, into $ns: run under tma (regions) or alone.
ns=
run() { # label n way [env...]
    local label=$1 n=$2 way=$3; shift 3
    local out
    if [ "$label" = marker-off ] || [ "$way" = empty ]; then
        out=$(env "$@" "$work/bench" "$way" "$n")
    else
        out=$(env "$@" "$tma" stat --regions "${tma_args[@]}" --csv -o "$work/$label.csv" -- "$work/bench" "$way" "$n" 2>/dev/null)
        if [ "$way" = read ]; then
            ns=$(echo "$out" | awk '{print $3}')
            return
        fi
        # The region must have been counted once per pair (and the 1000 pairs of warm-up).
        local calls
        calls=$(awk -F, '$1=="merged" && $3=="r" {print $5}' "$work/$label.csv")
        if [ "$calls" != "$((n + 1000))" ]; then
            echo "$label: tma counted ${calls:-no} calls, expected $((n + 1000))" >&2
            exit 1
        fi
    fi
    ns=$(echo "$out" | awk '{print $3}')
}

tma_args=()
RUNS=${RUNS:-1}
# The median of RUNS runs of one FIFO row, into $ns (the same arguments as run).
fifo_row() {
    local all=() i
    for ((i = 0; i < RUNS; i++)); do
        run "$@"
        all+=("$ns")
    done
    ns=$(printf '%s\n' "${all[@]}" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }')
}

line() { # label n ns empty
    awk -v l="$1" -v n="$2" -v t="$3" -v e="$4" \
        'BEGIN { printf "%-16s %10d %14.1f %14.1f %10.0f\n", l, n, t, t - e, (e > 0 ? t / e : 0) }'
}
run empty "$N_FIFO" empty; empty_fifo=$ns
run empty "$N_IN" empty; empty_in=$ns
printf '%-16s %10s %14s %14s %10s\n' way pairs "ns/pair" "overhead ns" ratio
line empty "$N_IN" "$empty_in" "$empty_in"
fifo_row fifo "$N_FIFO" fifo; line fifo "$N_FIFO" "$ns" "$empty_fifo"
fifo_row marker-fifo "$N_FIFO" marker TMA_MARKER_MODE=fifo; line marker-fifo "$N_FIFO" "$ns" "$empty_fifo"
if [ "${STAY:-0}" = 1 ]; then
    tma_args=(--no-follow)
    fifo_row fifo-stay "$N_FIFO" fifo; line fifo-stay "$N_FIFO" "$ns" "$empty_fifo"
    fifo_row marker-fifo-stay "$N_FIFO" marker TMA_MARKER_MODE=fifo; line marker-fifo-stay "$N_FIFO" "$ns" "$empty_fifo"
    tma_args=()
fi
run marker "$N_IN" marker; line marker "$N_IN" "$ns" "$empty_in"; marker_ns=$ns
run read "$N_IN" read; line read "$N_IN" "$ns" "$empty_in"; read_ns=$ns
if [ "${OWN_THREAD:-0}" = 1 ]; then
    run marker-own "$N_IN" marker TMA_MARKER_OWN_THREAD=1; line marker-own "$N_IN" "$ns" "$empty_in"
fi
run marker-off "$N_IN" marker; line marker-off "$N_IN" "$ns" "$empty_in"
echo "(ratio: the loop with a region per iteration over the same loop without; overhead: the difference per pair)"
[ "$RUNS" -gt 1 ] && echo "(FIFO rows: the median of $RUNS runs)"
awk -v m="$marker_ns" -v r="$read_ns" 'BEGIN { printf "marker in process over the kernel read alone: %.1f ns per pair (the library)\n", m - r }'
