#!/usr/bin/env bash
# Benchmark of `tma bench` itself: wall time per measured figure and run-to-run spread of the
# medians over a set of instruction forms, plus the peer tool (llvm-exegesis) in the same run.
#
# Usage: scripts/bench-microbench.sh [RUNS (default 3)] [extra tma bench flags...]
# Targets: < 20 ms per figure at default precision; run-to-run spread of medians < 0.5%.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-3}
shift || true
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p tma-cli
TMA="$CARGO_TARGET_DIR/release/tma"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

cat > "$WORK/forms.txt" <<'EOF'
add rax, rcx
sub rbx, rdx
imul rax, rbx
adc rax, rcx
lea rax, [rbx+rcx*4+8]
popcnt rax, rbx
lzcnt rcx, rdx
mulx r64, r64, r64
crc32 rax, rbx
bswap rax
movzx eax, bl
paddd xmm1, xmm2
pshufb xmm3, xmm4
pclmulqdq xmm1, xmm2, 0x11
aesenc xmm1, xmm2
sha256rnds2 xmm1, xmm2
sha256msg1 xmm1, xmm2
sha256msg2 xmm1, xmm2
vpaddd ymm1, ymm2, ymm3
vpaddd zmm1, zmm2, zmm3
vfmadd231ps ymm0, ymm1, ymm2
vaddpd zmm3, zmm4, zmm5
mulsd xmm0, xmm1
addps xmm1, xmm2
EOF

python3 - "$TMA" "$WORK" "$RUNS" "$@" <<'PY'
import json, os, resource, statistics, subprocess, sys, time
tma, work, runs, extra = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
data, walls, cpus = [], [], []
for r in range(runs):
    out = f"{work}/run{r}.json"
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([tma, "bench", "--file", f"{work}/forms.txt", "--clock", "tsc", "--json", "-o", out, *extra])
    walls.append(time.monotonic() - t0)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpus.append((ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime))
    data.append(json.load(open(out)))

def reported(form):
    """The figures a user reads: latency per pair, best throughput."""
    out = {}
    for p in form["latency"]:
        if p["figures"]:
            out[f"lat {p['pair']}"] = p["figures"][0]["median"]
    tp = form.get("throughput")
    if tp and tp["best"]:
        out["tp best"] = tp["best"][0]["median"]
    return out

def measured(form):
    n = sum(1 for p in form["latency"] if p["figures"])
    tp = form.get("throughput")
    return n + (sum(1 for c in tp["per_chains"] if c["figures"]) if tp else 0)

per_run = [{f["input"]: reported(f) for f in d["forms"]} for d in data]
nfig = sum(measured(f) for f in data[0]["forms"])
print(f"{'instruction':28} {'figures':>7} {'latency':>9} {'tp(best)':>9} {'run-to-run spread (max)':>24}")
spreads_all = []
for form in data[0]["forms"]:
    name = form["input"]
    spreads = []
    for key in per_run[0][name]:
        vals = [pr[name][key] for pr in per_run if key in pr.get(name, {})]
        if len(vals) > 1:
            spreads.append((max(vals) - min(vals)) / statistics.median(vals) * 100)
    spreads_all.extend(spreads)
    rep = per_run[0][name]
    lat = max((v for k, v in rep.items() if k.startswith("lat")), default=float("nan"))
    print(f"{name:28} {measured(form):7d} {lat:9.3f} {rep.get('tp best', float('nan')):9.3f} "
          f"{(max(spreads) if spreads else float('nan')):23.2f}%")
for e in data[0].get("errors", []):
    print(f"{e['input']:28} error: {e['error']}")
print()
print(f"forms: {len(data[0]['forms'])}; measured figures per run (pairs + every chain count): {nfig}; runs: {runs}")
print(f"load average at the end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
for r in range(runs):
    print(f"run {r+1}: wall {walls[r]:.2f} s = {walls[r]/nfig*1000:.1f} ms/figure; "
          f"CPU {cpus[r]:.2f} s = {cpus[r]/nfig*1000:.1f} ms/figure")
print(f"median wall time per figure: {statistics.median(w/nfig*1000 for w in walls):.1f} ms, "
      f"CPU time per figure: {statistics.median(c/nfig*1000 for c in cpus):.1f} ms (target < 20 ms)")
if spreads_all:
    s = sorted(spreads_all)
    print(f"run-to-run spread of reported medians ({len(s)} figures): median {statistics.median(s):.2f}%, "
          f"p90 {s[int(0.9*(len(s)-1))]:.2f}%, max {s[-1]:.2f}% (target < 0.5%)")
PY

echo
echo "peer: llvm-exegesis (same run)"
if command -v llvm-exegesis >/dev/null; then
  for op in ADD64rr IMUL64rr SHA256RNDS2rr; do
    printf '  %-14s ' "$op"
    out=$(llvm-exegesis -mode=latency -opcode-name="$op" 2>&1 | grep -iE "error|event|measurements" | head -1 || true)
    echo "${out:-(no output)}"
  done
  echo "  => llvm-exegesis has no TSC fallback and cannot measure on a machine without a PMU; no ratio possible."
else
  echo "  not installed (not installed by this script)."
fi
