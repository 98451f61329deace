#!/usr/bin/env bash
# Cost of `tma serve`: the CPU it takes to count (per interval and as a share of one CPU, with
# nobody scraping), the CPU per scrape, and the scrape latency (median and p99 of sequential
# scrapes). When node_exporter is installed (Debian `prometheus-node-exporter`) its scrape
# latency is measured the same way and the ratio printed. Goals: counting under 0.5% of one CPU
# at a 10 s interval, and at a 15 s interval with 50 cgroups (CGROUPS=50 INTERVAL=15s).
#
# Usage: scripts/bench-serve.sh [SECONDS] [SCRAPES]   (default 60 s of counting, 500 scrapes)
# Env:   TMA=path/to/tma (skip the release build), INTERVAL (default 10s)
#        SERVE_ARGS (extra arguments, e.g. "-l 3" or "--cgroup system.slice/x.service")
#        CGROUPS=N: make N cgroups under the cgroup2 mount (root needed), each holding a small
#        shell loop, and count them; CGROUP_MODE=engine (default: --cgroup for each, the
#        counters opened per cgroup and CPU) or tree (--cgroup-top N: cpu.stat of the whole
#        cgroup tree, no counter opened per cgroup).
set -euo pipefail
SECONDS_COUNTING=${1:-60}
SCRAPES=${2:-500}
INTERVAL=${INTERVAL:-10s}
CGROUPS=${CGROUPS:-0}
CGROUP_MODE=${CGROUP_MODE:-engine}
cd "$(dirname "$0")/.."
if [ -z "${TMA:-}" ]; then
    cargo build --release -q -p tma-cli
    TMA=${CARGO_TARGET_DIR:-target}/release/tma
fi
command -v curl >/dev/null || { echo "needs curl"; exit 2; }
tmp=$(mktemp -d)
pids=()
cgbase=
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    if [ -n "$cgbase" ] && [ -d "$cgbase" ]; then
        # The loops' last `sleep` may outlive its shell for a moment.
        for _ in $(seq 50); do
            rmdir "$cgbase"/cg* 2>/dev/null || true
            rmdir "$cgbase" 2>/dev/null && break
            sleep 0.1
        done
    fi
    rm -rf "$tmp"
}
trap cleanup EXIT

cgroup_args=
if [ "$CGROUPS" -gt 0 ]; then
    cg2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/self/mounts)
    [ -n "$cg2" ] || { echo "skipped: no cgroup2 file system mounted"; exit 0; }
    [ -w "$cg2" ] || { echo "skipped: $cg2 is not writable (run as root)"; exit 0; }
    rel="tma-bench-$$.slice"
    cgbase="$cg2/$rel"
    mkdir "$cgbase"
    for i in $(seq "$CGROUPS"); do
        mkdir "$cgbase/cg$i"
        # A shell that moves itself into its cgroup, then wakes twice a second.
        sh -c 'echo $$ > "$1/cgroup.procs" && exec sh -c "while :; do sleep 0.5; done"' _ "$cgbase/cg$i" &
        pids+=("$!")
        if [ "$CGROUP_MODE" = tree ]; then :; else cgroup_args="$cgroup_args --cgroup $rel/cg$i"; fi
    done
    [ "$CGROUP_MODE" = tree ] && cgroup_args="--cgroup-top $CGROUPS"
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
# CPU time of a process (all its threads), in seconds, at nanosecond resolution (schedstat).
cpu_s() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{ s += $1 } END { printf "%.9f\n", s / 1e9 }'; }
# Up to 70 s: /-/ready answers 200 once the first interval is counted (15 s with INTERVAL=15s).
wait_ready() { for _ in $(seq 700); do curl -fs -o /dev/null "http://127.0.0.1:$1$2" && return 0; sleep 0.1; done; echo "no answer on :$1$2"; exit 2; }
# Sequential scrapes: prints the sorted latencies in ms into $2.
latencies() {
    : >"$2"
    for _ in $(seq "$SCRAPES"); do
        curl -s -o /dev/null -H 'Accept: text/plain;version=0.0.4' -w '%{time_total}\n' "$1" >>"$2"
    done
    sort -n "$2" -o "$2"
}
pct() { awk -v p="$2" '{ a[NR] = $1 } END { i = int(NR * p / 100); if (i < 1) i = 1; printf "%.3f", a[i] * 1000 }' "$1"; }

port=$(free_port)
# shellcheck disable=SC2086
"$TMA" serve --listen "127.0.0.1:$port" --interval "$INTERVAL" $cgroup_args ${SERVE_ARGS:-} 2>"$tmp/serve.log" &
pid=$!
pids+=("$pid")
wait_ready "$port" /-/ready
c0=$(cpu_s "$pid"); t0=$(date +%s.%N)
n0=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^tma_intervals_total / { print $2 }')
sleep "$SECONDS_COUNTING"
c1=$(cpu_s "$pid"); t1=$(date +%s.%N)
n1=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^tma_intervals_total / { print $2 }')
[ "$CGROUPS" -gt 0 ] && echo "cgroups:   $CGROUPS ($CGROUP_MODE mode), $(curl -s "http://127.0.0.1:$port/metrics" | grep -c '^[^#]') series exposed"
echo "tma serve --interval $INTERVAL ${SERVE_ARGS:-}: $(grep -o 'event=pmu_unavailable' "$tmp/serve.log" >/dev/null && echo 'software counts (no PMU)' || echo 'TMA tree')"
awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v n0="$n0" -v n1="$n1" 'BEGIN {
    n = n1 - n0; if (n < 1) n = 1
    printf "counting:  %.3f CPU-s over %.1f s = %.3f%% of one CPU, ratio %.5f (goal < 0.005); %.2f ms CPU per interval (%d intervals)\n",
        c1 - c0, t1 - t0, 100 * (c1 - c0) / (t1 - t0), (c1 - c0) / (t1 - t0), 1000 * (c1 - c0) / n, n1 - n0 }'

c0=$(cpu_s "$pid")
latencies "http://127.0.0.1:$port/metrics" "$tmp/tma.lat"
c1=$(cpu_s "$pid")
size=$(curl -s "http://127.0.0.1:$port/metrics" | wc -c)
awk -v c0="$c0" -v c1="$c1" -v n="$SCRAPES" -v size="$size" 'BEGIN {
    printf "serving:   %.3f ms CPU per scrape (%d scrapes, %d bytes each)\n", 1000 * (c1 - c0) / n, n, size }'
echo "latency:   tma serve median $(pct "$tmp/tma.lat" 50) ms, p99 $(pct "$tmp/tma.lat" 99) ms"

ne=$(command -v prometheus-node-exporter || command -v node_exporter || true)
if [ -n "$ne" ]; then
    nport=$(free_port)
    "$ne" --web.listen-address="127.0.0.1:$nport" >/dev/null 2>&1 &
    pids+=("$!")
    wait_ready "$nport" /metrics
    latencies "http://127.0.0.1:$nport/metrics" "$tmp/ne.lat"
    echo "latency:   node_exporter median $(pct "$tmp/ne.lat" 50) ms, p99 $(pct "$tmp/ne.lat" 99) ms"
    awk -v a="$(pct "$tmp/tma.lat" 50)" -v b="$(pct "$tmp/ne.lat" 50)" 'BEGIN { printf "ratio:     tma serve / node_exporter median scrape latency = %.3f\n", a / b }'
else
    echo "node_exporter is not installed (Debian prometheus-node-exporter): no latency ratio"
fi
