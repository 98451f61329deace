#!/usr/bin/env bash
# Benchmark of `tma bench` itself: are its figures stable from run to run, and what do they
# cost? Runs eight instruction forms N times, each form as its own `tma bench` process (so
# every run is a fresh measurement, as a user would get it), and reports per form:
#   - stable: the share of runs whose figures are all within 2% of that figure's median over
#     the runs (goal: N of N for every form);
#   - spread: (max - min) / median of each figure over the runs, the worst figure shown;
#   - unconverged: runs where tma itself marked a figure UNCONVERGED (`?`): it never presents
#     those as clean numbers, but they are not stable figures either; and, over all forms, the
#     figures off by > 2% that tma showed without any mark (`?` or `*`): confidently wrong;
#   - time per figure and per instruction form (wall clock of the process; goal: at most 5x
#     the 0.1 s per form that the single-repetition method took).
# The eight forms are those of an earlier 10-run experiment (vpaddd, popcnt, add, imul) plus
# lea, mulx, paddd and bswap.
#
# Usage: scripts/bench-microbench.sh [--repeat N (default 5)] [--forms FILE] [-- tma bench flags...]
#        TMA=path/to/tma scripts/bench-microbench.sh ...   (measure that build, no cargo build)
# The figures matter on a quiet machine: run it there (other load only adds noise).
set -euo pipefail
cd "$(dirname "$0")/.."
REPEAT=5
FORMS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --repeat) REPEAT=$2; shift 2 ;;
    --repeat=*) REPEAT=${1#--repeat=}; shift ;;
    --forms) FORMS=$2; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done
# TMA=path/to/tma skips the release build (e.g. to compare another build).
if [ -z "${TMA:-}" ]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
  cargo build --release -q -p tma-cli
  TMA="$CARGO_TARGET_DIR/release/tma"
fi
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

if [ -z "$FORMS" ]; then
  FORMS="$WORK/forms.txt"
  cat > "$FORMS" <<'EOF'
vpaddd ymm1, ymm1, ymm2
popcnt rax, rbx
add rax, rbx
imul rax, rbx
lea rax, [rbx+rcx*4+8]
mulx rax, rbx, rcx
paddd xmm1, xmm2
bswap rax
EOF
fi

python3 - "$TMA" "$WORK" "$REPEAT" "$FORMS" "$@" <<'PY'
import json, os, statistics, subprocess, sys, time
tma, work, repeat, forms_file, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:]
forms = [l.strip() for l in open(forms_file) if l.strip() and not l.startswith("#")]

def figures(form):
    """The figures a user reads: latency per pair, best throughput; each with its marks: `?`
    (unconverged) and `*` (not within 2% of a plausible value)."""
    def mark(f):
        return ("" if f.get("snapped_ok", True) else "*") + ("" if f.get("converged", True) else "?")
    out = {}
    for p in form["latency"]:
        if p["figures"]:
            f = p["figures"][0]
            out[f"lat {p['pair']}"] = (f["median"], mark(f))
    tp = form.get("throughput")
    if tp and tp["best"]:
        f = tp["best"][0]
        out["tp"] = (f["median"], mark(f))
    return out

runs = {f: [] for f in forms}      # form -> list of {figure: (value, converged)}
walls = {f: [] for f in forms}
errors = {f: [] for f in forms}
for r in range(repeat):
    for f in forms:
        out = f"{work}/out.json"
        t0 = time.monotonic()
        p = subprocess.run([tma, "bench", f, "--clock", "tsc", "--json", "-o", out, *extra],
                           capture_output=True, text=True)
        walls[f].append(time.monotonic() - t0)
        if p.returncode != 0:
            errors[f].append(p.stderr.strip().splitlines()[-1] if p.stderr.strip() else f"exit {p.returncode}")
            continue
        doc = json.load(open(out))
        runs[f].append(figures(doc["forms"][0]))
    print(f"run {r + 1}/{repeat} done", file=sys.stderr)

print(f"{'instruction':26} {'stable':>7} {'unconv':>6} {'worst spread':>13} {'figures (median over runs)':34} {'s/form':>7} {'ms/figure':>9}")
all_stable, times, wrong_total = True, [], [0]
for f in forms:
    rs = runs[f]
    keys = sorted({k for r in rs for k in r})
    med = {k: statistics.median(r[k][0] for r in rs if k in r) for k in keys}
    stable = sum(1 for r in rs if all(abs(r[k][0] - med[k]) <= 0.02 * med[k] for k in keys if k in r))
    unconv = sum(1 for r in rs if any("?" in r[k][1] for k in r))
    # Off by more than 2% and shown without a mark: a confidently wrong figure.
    unmarked_off = sum(1 for r in rs for k in r
                       if abs(r[k][0] - med[k]) > 0.02 * med[k] and not r[k][1])
    wrong_total[0] += unmarked_off
    spreads = {k: (max(r[k][0] for r in rs if k in r) - min(r[k][0] for r in rs if k in r)) / med[k] * 100 for k in keys}
    worst = max(spreads, key=spreads.get) if spreads else None
    nfig = len(keys) or 1
    wall = statistics.median(walls[f])
    times.append(wall)
    all_stable &= stable == repeat and not errors[f]
    figs = ", ".join(f"{k}={med[k]:.3f}" for k in keys)
    ws = f"{spreads[worst]:.2f}% {worst}" if worst else "-"
    print(f"{f:26} {stable:>3}/{repeat:<3} {unconv:>6} {ws:>13} {figs:34} {wall:7.2f} {wall / nfig * 1000:9.1f}")
    for i, r in enumerate(rs):
        off = [f"{k}={r[k][0]:.3f}{r[k][1]}" for k in keys
               if k in r and abs(r[k][0] - med[k]) > 0.02 * med[k]]
        if off:
            print(f"{'':26} run {i + 1}: off by > 2%: {', '.join(off)} (marks as tma showed them: ? unconverged, * implausible)")
    for e in errors[f][:3]:
        print(f"{'':26} error: {e}")
print()
print(f"forms: {len(forms)}; runs per form: {repeat}; load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
print(f"time per instruction form: median {statistics.median(times):.2f} s, max {max(times):.2f} s "
      f"(goal <= 0.5 s: 5x the 0.1 s of one repetition per figure); ratio to 0.1 s: {statistics.median(times) / 0.1:.1f}x")
print(f"figures off their median by > 2% and shown without a mark (confidently wrong): {wrong_total[0]}")
print("verdict: " + ("every form stable in every run" if all_stable else "NOT every form stable in every run (see the table)"))
PY

echo
echo "peer: llvm-exegesis (same run)"
if command -v llvm-exegesis >/dev/null; then
  for op in ADD64rr IMUL64rr VPADDDYrr; do
    printf '  %-14s ' "$op"
    out=$(llvm-exegesis -mode=latency -opcode-name="$op" 2>&1 | grep -iE "error|event|measurements" | head -1 || true)
    echo "${out:-(no output)}"
  done
  echo "  => llvm-exegesis has no TSC fallback and cannot measure on a machine without a PMU; no ratio possible."
else
  echo "  not installed (not installed by this script)."
fi
