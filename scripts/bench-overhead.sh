#!/bin/sh
# Counting overhead of `tma stat` on a fixed CPU-bound workload, against running it bare and
# under `perf stat` with the same software events, measured in the same run (interleaved
# rounds, median of N). Target: tma within 1% of bare.
#
# Usage: scripts/bench-overhead.sh [ROUNDS]   (default 7; builds tma in release mode)
# Env:   TMA=path/to/tma (skip the build), WORK_ITERS (workload size, default 20000000)
set -eu
ROUNDS=${1:-7}
ITERS=${WORK_ITERS:-20000000}
cd "$(dirname "$0")/.."
if [ -z "${TMA:-}" ]; then
    cargo build --release -q -p tma-cli
    TMA=${CARGO_TARGET_DIR:-target}/release/tma
fi
EVENTS=task-clock,context-switches,cpu-migrations,page-faults
# The workload: a fixed amount of integer arithmetic in awk (single-threaded, no I/O).
now() { date +%s%N; }
time_of() { t0=$(now); "$@" >/dev/null 2>&1; t1=$(now); echo $(( (t1 - t0) / 1000 )); }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

have_perf=0
if command -v perf >/dev/null 2>&1 && perf stat -e "$EVENTS" -x, -o /dev/null true >/dev/null 2>&1; then
    have_perf=1
fi
: >/tmp/bench-bare.$$; : >/tmp/bench-tma.$$; : >/tmp/bench-perf.$$
i=0
while [ "$i" -lt "$ROUNDS" ]; do
    time_of awk -v n="$ITERS" 'BEGIN { s = 0; for (i = 0; i < n; i++) s += i % 7; if (s < 0) print s }' >>/tmp/bench-bare.$$
    time_of "$TMA" stat -- awk -v n="$ITERS" 'BEGIN { s = 0; for (i = 0; i < n; i++) s += i % 7; if (s < 0) print s }' >>/tmp/bench-tma.$$
    if [ "$have_perf" = 1 ]; then
        time_of perf stat -e "$EVENTS" -x, -o /dev/null -- awk -v n="$ITERS" 'BEGIN { s = 0; for (i = 0; i < n; i++) s += i % 7; if (s < 0) print s }' >>/tmp/bench-perf.$$
    fi
    i=$((i + 1))
done
bare=$(median </tmp/bench-bare.$$)
tmat=$(median </tmp/bench-tma.$$)
echo "workload: awk loop of $ITERS iterations, $ROUNDS interleaved rounds, median wall time"
printf '%-70s %8.3f s\n' "bare" "$(echo "$bare" | awk '{print $1/1e6}')"
printf '%-70s %8.3f s   ratio to bare %.4f\n' "tma stat ($EVENTS)" "$(echo "$tmat" | awk '{print $1/1e6}')" "$(echo "$tmat $bare" | awk '{print $1/$2}')"
if [ "$have_perf" = 1 ]; then
    perft=$(median </tmp/bench-perf.$$)
    printf '%-70s %8.3f s   ratio to bare %.4f\n' "perf stat -e $EVENTS" "$(echo "$perft" | awk '{print $1/1e6}')" "$(echo "$perft $bare" | awk '{print $1/$2}')"
    printf '%-70s %8s     ratio tma/perf %.4f\n' "" "" "$(echo "$tmat $perft" | awk '{print $1/$2}')"
else
    echo "perf stat: not available here (skipped)"
fi
rm -f /tmp/bench-bare.$$ /tmp/bench-tma.$$ /tmp/bench-perf.$$
