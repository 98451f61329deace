#!/usr/bin/env bash
# SHA-256 throughput benchmark: tma's portable, SHA-NI one stream and SHA-NI interleaved
# implementations side by side with `openssl speed -evp sha256` (16384-byte column) and coreutils
# `sha256sum`, all in the same run, in cycles per byte and GB/s, plus ratios to OpenSSL.
#
# Every figure is CPU time (tma workloads: the thread CPU clock; openssl speed: user time, its
# default; sha256sum: perf task-clock), so a busy machine slows nothing down on paper. Cycles
# come from the core clock measured by `tma workload` (a timed chain of dependent adds).
#
# Targets (issue 7): SHA-NI one stream >= OpenSSL (ratio >= 1.00), interleaved > OpenSSL.
#
# Usage: scripts/bench-sha256.sh [SIZE_MIB]   (default 512: size of the file for sha256sum)
set -euo pipefail
cd "$(dirname "$0")/.."
SIZE_MIB=${1:-512}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
cargo build --release -q -p tma-cli
TMA="$CARGO_TARGET_DIR/release/tma"

need() { command -v "$1" >/dev/null || { echo "bench-sha256: $1 not found: $2" >&2; exit 1; }; }
need python3 "used to parse JSON"
need openssl "install openssl to compare with it"
need sha256sum "install coreutils to compare with it"
need perf "install linux-perf (its software task-clock times sha256sum)"

work=$(mktemp -d /dev/shm/tma-bench-sha.XXXXXX 2>/dev/null || mktemp -d)
trap 'rm -rf "$work"' EXIT

# tma workloads: 1 MiB buffers (cache resident, like openssl's 16 KiB blocks), ~1 GiB per figure.
wl() { "$TMA" workload sha256 --size 1M --json "$@"; }
wl --impl portable --iters 256 > "$work/portable.json"
ni=1
if ! wl --impl ni --iters 1024 > "$work/ni1.json" 2> "$work/ni.err"; then
  ni=0; echo "SHA-NI unavailable: $(cat "$work/ni.err")" >&2
fi
if [ $ni = 1 ]; then
  wl --impl ni --iters 512 --streams 2 > "$work/ni2.json"
  wl --impl ni --iters 256 --streams 4 > "$work/ni4.json"
fi

# openssl: bytes/s per block size in machine-readable form; take the 16384-byte column.
openssl speed -mr -evp sha256 -seconds 3 2>/dev/null | grep '^+F:' > "$work/openssl.txt"

# coreutils and tma sha256sum on the same file(s), task-clock from perf (software event).
head -c $((SIZE_MIB << 20)) /dev/urandom > "$work/big"
for i in 1 2 3 4; do head -c $((SIZE_MIB << 18)) /dev/urandom > "$work/part$i"; done
task_ms() { perf stat -x, -e task-clock -o "$work/perf.txt" -- "$@" > /dev/null; awk -F, '/task-clock/ {print $1; exit}' "$work/perf.txt"; }
cat "$work/big" "$work/part"* > /dev/null  # warm the page cache (tmpfs anyway)
cu_ms=$(task_ms sha256sum "$work/big")
tma1_ms=$(task_ms "$TMA" sha256sum "$work/big")
cu4_ms=$(task_ms sha256sum "$work"/part1 "$work"/part2 "$work"/part3 "$work"/part4)
tma4_ms=$(task_ms "$TMA" sha256sum "$work"/part1 "$work"/part2 "$work"/part3 "$work"/part4)

python3 - "$work" "$SIZE_MIB" "$cu_ms" "$tma1_ms" "$cu4_ms" "$tma4_ms" "$ni" <<'PY'
import json, sys, os
work, size_mib, cu_ms, tma1_ms, cu4_ms, tma4_ms, ni = sys.argv[1:]
size = int(size_mib) << 20
load = lambda n: json.load(open(os.path.join(work, n)))
p = load("portable.json")
hz = p["clock"]["core_hz"]
rows = []
def wl_row(name, j):
    s = j["sha256"]
    rows.append((name, s["bytes_per_second"], j["clock"]["core_hz"] / s["bytes_per_second"]))
wl_row("tma portable (1 stream)", p)
if ni == "1":
    wl_row("tma SHA-NI, 1 stream", load("ni1.json"))
    wl_row("tma SHA-NI, 2 streams interleaved", load("ni2.json"))
    wl_row("tma SHA-NI, 4 streams interleaved", load("ni4.json"))
f = open(os.path.join(work, "openssl.txt")).read().strip().split(":")
ossl = float(f[-1])  # 16384-byte blocks, bytes per second of user CPU time
rows.append(("openssl speed -evp sha256 (16 KiB)", ossl, hz / ossl))
for name, ms, nbytes in [
    (f"coreutils sha256sum, 1 file of {size_mib} MiB", cu_ms, size),
    (f"tma sha256sum, 1 file of {size_mib} MiB", tma1_ms, size),
    (f"coreutils sha256sum, 4 files of {int(size_mib)//4} MiB", cu4_ms, size),
    (f"tma sha256sum, 4 files of {int(size_mib)//4} MiB (interleaved)", tma4_ms, size),
]:
    bps = nbytes / (float(ms) / 1e3)
    rows.append((name, bps, hz / bps))
print(f"core clock {hz/1e9:.3f} GHz (dependent add chain); all rates per CPU second")
print(f"{'implementation':<52} {'GB/s':>7} {'cycles/B':>9} {'vs openssl':>10}")
for name, bps, cpb in rows:
    print(f"{name:<52} {bps/1e9:7.3f} {cpb:9.3f} {bps/ossl:9.2f}x")
if ni == "1":
    one = load("ni1.json")["sha256"]["bytes_per_second"]
    four = load("ni4.json")["sha256"]["bytes_per_second"]
    print(f"target SHA-NI 1 stream >= openssl: {'met' if one >= ossl else 'NOT met'} ({one/ossl:.2f}x)")
    print(f"target interleaved > openssl:      {'met' if four > ossl else 'NOT met'} ({four/ossl:.2f}x)")
PY
