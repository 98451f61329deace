#!/usr/bin/env bash
# DRAM pointer-chase benchmark: ns per access without and with the jump-pointer software
# prefetch, over several buffer sizes and prefetch distances, on a release build. Reports the
# speedup ratio (no-prefetch / prefetch) measured in the same run. CPU time of the timed loop.
#
# Usage: scripts/bench-dram.sh [SIZE ...]   (default: 64M 512M 2G)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p tma-cli
TMA="$CARGO_TARGET_DIR/release/tma"
command -v python3 >/dev/null || { echo "bench-dram: python3 not found (parses JSON)" >&2; exit 1; }
sizes=("$@"); [ ${#sizes[@]} -gt 0 ] || sizes=(64M 512M 2G)
printf '%-8s %-9s %12s %12s %14s %9s\n' size distance "ns/access" "prefetch ns" "cycles/access" speedup
for size in "${sizes[@]}"; do
  base=$("$TMA" workload dram --size "$size" --accesses 10000000 --json)
  for d in 4 8 16 32 64; do
    pf=$("$TMA" workload dram --size "$size" --accesses 10000000 --prefetch --distance "$d" --json)
    python3 - "$size" "$d" "$base" "$pf" <<'PY'
import json, sys
size, d, a, b = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), json.loads(sys.argv[4])
na, nb = a["dram"]["ns_per_access"], b["dram"]["ns_per_access"]
cyc = a["dram"]["cycles_per_access"] or float("nan")
print(f"{size:<8} {d:<9} {na:12.2f} {nb:12.2f} {cyc:14.1f} {na/nb:8.2f}x")
PY
  done
done
