#!/usr/bin/env bash
# SHA-256 throughput benchmark: tma's portable, SHA-NI one stream and SHA-NI
# interleaved implementations (2, 3, 4, 6 and 8 streams) side by side with `openssl speed -evp
# sha256` (16384-byte column) and coreutils `sha256sum`, all in the same run, in cycles per byte
# and GB/s, plus the instruction-level lower bound that `tma bench --preset sha` derives (the
# largest of its lower-bound terms for each stream count; a term that a kernel of the same run
# beats is said not to be a lower bound and is dropped, so no share is over 100%; the block mix
# measured as one body is printed as a reference point, not a bound), and the targets as
# PASS/FAIL lines:
#   * interleaved: the best of 4 to 8 streams reaches >= 80% of the derived bound, or >= 2.5x
#     OpenSSL's single-stream speed, whichever is stricter (both are checked);
#   * portable >= coreutils sha256sum per CPU second (`tma sha256sum --impl portable` against
#     `sha256sum` on the same file, reading included, the least task-clock of 3 runs each);
#   * SHA-NI one stream >= OpenSSL.
# Many files: `tma sha256sum` against coreutils on 4 equal files and on 96 files of mixed sizes.
#
# Every figure is CPU time (tma workloads: the thread CPU clock; openssl speed: user time, its
# default; sha256sum: perf task-clock), so a busy machine slows little down on paper; run it on a
# quiet machine for figures to record. Cycles come from the core clock measured by
# `tma workload` (a timed chain of dependent adds).
#
# On a shared host another tenant's thread on the SMT sibling slows vector work for seconds at a
# time, so the interleaved figures and the targets use the fastest pass over the 1 MiB buffers
# on both sides: `tma workload`'s best_bytes_per_second, and OpenSSL's SHA-256 through Python's
# hashlib (which calls OpenSSL's EVP code) timed per 1 MiB pass the same way. The averages
# (tma's whole run, `openssl speed`) are printed too, with the targets on them.
#
# Usage: scripts/bench-sha256.sh [SIZE_MIB]   (default 512: bytes hashed per figure)
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

# tma workloads: 1 MiB buffers (cache resident, like openssl's 16 KiB blocks), SIZE_MIB per figure.
wl() { "$TMA" workload sha256 --size 1M --json "$@"; }
wl --impl portable --iters "$SIZE_MIB" > "$work/portable.json"
ni=1
if ! wl --impl ni --iters "$SIZE_MIB" > "$work/ni1.json" 2> "$work/ni.err"; then
  ni=0; echo "SHA-NI unavailable: $(cat "$work/ni.err")" >&2
fi
WIDTHS="2 3 4 6 8"
if [ $ni = 1 ]; then
  for k in $WIDTHS; do
    wl --impl ni --iters $(( (SIZE_MIB + k - 1) / k )) --streams "$k" > "$work/ni$k.json"
  done
  # The instruction-level bound (throughputs alone and in mixed pairs; see `tma bench --preset sha`).
  "$TMA" bench --preset sha --clock tsc --json -o "$work/bench.json" > /dev/null
fi

# openssl: bytes/s per block size in machine-readable form; take the 16384-byte column.
openssl speed -mr -evp sha256 -seconds 3 2>/dev/null | grep '^+F:' > "$work/openssl.txt"
# OpenSSL per pass: its SHA-256 through hashlib, fastest of 256 passes over a 1 MiB buffer (CPU
# time of the thread), the statistic of tma's fastest pass.
python3 - > "$work/openssl_pass.txt" <<'PY'
import hashlib, os, time
assert "openssl" in repr(hashlib.sha256), "python's hashlib is not built on OpenSSL here"
buf = os.urandom(1 << 20)
best = float("inf")
for _ in range(256):
    t0 = time.thread_time_ns()
    hashlib.sha256(buf).digest()
    best = min(best, time.thread_time_ns() - t0)
print((1 << 20) / (best / 1e9))
PY

# coreutils and tma sha256sum on the same file(s), task-clock from perf (software event), the
# least of 3 runs each.
head -c $((SIZE_MIB << 20)) /dev/urandom > "$work/big"
for i in 1 2 3 4; do head -c $((SIZE_MIB << 18)) /dev/urandom > "$work/part$i"; done
# The least task-clock of 3 runs: the same statistic on both sides, and a run that another
# tenant slowed down does not decide a ratio.
task_ms() {
  local best="" ms
  for _ in 1 2 3; do
    perf stat -x, -e task-clock -o "$work/perf.txt" -- "$@" > /dev/null
    ms=$(awk -F, '/task-clock/ {print $1; exit}' "$work/perf.txt")
    best=$(printf '%s\n' "$ms" $best | sort -g | head -n 1)
  done
  echo "$best"
}
# Many files of mixed sizes (log-uniform from 16 KiB to 16 MiB, a fixed seed, SIZE_MIB in all):
# `tma sha256sum`'s lanes roll from one file to the next, so the large ones do not end up alone.
mkdir "$work/mixed"
python3 - "$work/mixed" "$SIZE_MIB" <<'PY'
import os, random, sys
d, total = sys.argv[1], int(sys.argv[2]) << 20
rng = random.Random(14)
sizes = [int(2 ** rng.uniform(14, 24)) for _ in range(96)]
scale = total / sum(sizes)
for i, s in enumerate(sizes):
    with open(os.path.join(d, f"m{i:03d}"), "wb") as f:
        f.write(os.urandom(max(1, int(s * scale))))
PY
mixed_n=$(ls "$work/mixed" | wc -l)
mixed_bytes=$(du -bc "$work"/mixed/* | tail -n 1 | cut -f1)
cat "$work/big" "$work/part"* "$work"/mixed/* > /dev/null  # warm the page cache (tmpfs anyway)
cu_ms=$(task_ms sha256sum "$work/big")
tma1_ms=$(task_ms "$TMA" sha256sum "$work/big")
tmap_ms=$(task_ms "$TMA" sha256sum --impl portable "$work/big")
cu4_ms=$(task_ms sha256sum "$work"/part1 "$work"/part2 "$work"/part3 "$work"/part4)
tma4_ms=$(task_ms "$TMA" sha256sum "$work"/part1 "$work"/part2 "$work"/part3 "$work"/part4)
cum_ms=$(task_ms sha256sum "$work"/mixed/*)
tmam_ms=$(task_ms "$TMA" sha256sum "$work"/mixed/*)

python3 - "$work" "$SIZE_MIB" "$cu_ms" "$tma1_ms" "$tmap_ms" "$cu4_ms" "$tma4_ms" "$ni" "$WIDTHS" \
  "$cum_ms" "$tmam_ms" "$mixed_n" "$mixed_bytes" <<'PY'
import json, sys, os
(work, size_mib, cu_ms, tma1_ms, tmap_ms, cu4_ms, tma4_ms, ni, widths,
 cum_ms, tmam_ms, mixed_n, mixed_bytes) = sys.argv[1:]
widths = [int(k) for k in widths.split()]
size = int(size_mib) << 20
load = lambda n: json.load(open(os.path.join(work, n)))
p = load("portable.json")
hz = p["clock"]["core_hz"]
rows = []
def bps(j):
    return j["sha256"]["bytes_per_second"]
def best(j):
    return j["sha256"]["best_bytes_per_second"]
def wl_row(name, j):
    # Each workload's own core clock, for its average and its fastest pass alike.
    rows.append((name, bps(j), j["clock"]["core_hz"] / bps(j), best(j), j["clock"]["core_hz"]))
wl_row("tma portable (1 stream)", p)
if ni == "1":
    wl_row("tma SHA-NI, 1 stream", load("ni1.json"))
    for k in widths:
        wl_row(f"tma SHA-NI, {k} streams interleaved", load(f"ni{k}.json"))
f = open(os.path.join(work, "openssl.txt")).read().strip().split(":")
ossl = float(f[-1])  # 16384-byte blocks, bytes per second of user CPU time
ossl_pass = float(open(os.path.join(work, "openssl_pass.txt")).read())
rows.append(("openssl speed -evp sha256 (16 KiB) / OpenSSL via hashlib", ossl, hz / ossl, ossl_pass, hz))
tools = {}
for key, name, ms, nbytes in [
    ("cu", f"coreutils sha256sum, 1 file of {size_mib} MiB", cu_ms, size),
    ("tma1", f"tma sha256sum, 1 file of {size_mib} MiB", tma1_ms, size),
    ("tmap", f"tma sha256sum --impl portable, 1 file of {size_mib} MiB", tmap_ms, size),
    ("cu4", f"coreutils sha256sum, 4 files of {int(size_mib)//4} MiB", cu4_ms, size),
    ("tma4", f"tma sha256sum, 4 files of {int(size_mib)//4} MiB (interleaved)", tma4_ms, size),
    ("cum", f"coreutils sha256sum, {mixed_n} files of mixed sizes", cum_ms, int(mixed_bytes)),
    ("tmam", f"tma sha256sum, {mixed_n} files of mixed sizes (rolling lanes)", tmam_ms, int(mixed_bytes)),
]:
    r = nbytes / (float(ms) / 1e3)
    tools[key] = r
    rows.append((name, r, hz / r, None, hz))
print(f"core clock {hz/1e9:.3f} GHz (dependent add chain); all rates per CPU second")
print("average: the whole run (openssl speed for OpenSSL); fastest pass: the best 1 MiB pass "
      "(OpenSSL through hashlib)")
print(f"{'implementation':<58} {'GB/s':>7} {'cycles/B':>9} {'vs openssl':>10}   "
      f"{'fastest pass: c/B':>17} {'vs openssl':>10}")
for name, r, cpb, b, row_hz in rows:
    fast = f"{row_hz/b:17.3f} {b/ossl_pass:9.2f}x" if b else ""
    print(f"{name:<58} {r/1e9:7.3f} {cpb:9.3f} {r/ossl:9.2f}x   {fast}")

verdict = lambda ok: "PASS" if ok else "FAIL"
print()
if ni == "1":
    sha = load("bench.json")["sha"]
    b = sha["bounds"]
    unconfirmed = sha.get("unconfirmed", [])
    docs = {k: load(f"ni{k}.json") for k in widths}
    cpb = {k: j["clock"]["core_hz"] / best(j) for k, j in docs.items()}
    cpb_avg = {k: j["clock"]["core_hz"] / bps(j) for k, j in docs.items()}
    one_doc = load("ni1.json")

    # The kernels against the bounds: tma_bench::sha_bound::judge, in Python (keep the
    # two in step). A term that a kernel of this run beats was no lower bound: it is said so and
    # leaves the bound of every stream count (the latency chain, one stream / K, is one term).
    def judge(kernels):
        """kernels: {name: (streams, cycles per block)} -> ({name: (term, share)}, beaten, held)"""
        beaten = [(x["term"]["name"], x["term"]["cycles"], x["by"], x["measured"])
                  for x in b.get("beaten", [])]
        terms = [(t["name"], t["cycles"]) for t in b["terms"]]
        one = b["one_stream_cycles_per_block"]
        chain = lambda s: ("the latency chain of one stream" if s <= 1 else
                           f"the latency chain of one stream / {s} streams", one / max(s, 1))
        ok = {n: v for n, v in kernels.items() if v[1] > 0 and v[1] == v[1]}
        if ok:
            fastest = min(ok, key=lambda n: ok[n][1])
            beaten += [(t, c, fastest, ok[fastest][1]) for t, c in terms if c > ok[fastest][1]]
            terms = [(t, c) for t, c in terms if c <= ok[fastest][1]]
        over = [(chain(s)[1] / c, n) for n, (s, c) in ok.items() if chain(s)[1] > c]
        if over:
            n = max(over)[1]
            beaten.append((*chain(ok[n][0]), n, ok[n][1]))
        largest = lambda ts: next((x for x in ts if x[1] == max(y[1] for y in ts)), None)  # first on a tie
        out = {}
        for n, (s, c) in ok.items():
            t = largest(terms + ([] if over else [chain(s)]))
            if t:
                out[n] = (t, t[1] / c)
        return out, beaten, largest(terms), not over

    # Every kernel figure of this run, fastest passes and averages, against the bounds at once.
    name = lambda k: f"{k} streams" if k > 1 else "1 stream"
    figs = {name(1): (1, 64 * one_doc["clock"]["core_hz"] / best(one_doc)),
            **{name(k): (k, 64 * c) for k, c in cpb.items()},
            f"{name(1)} (average)": (1, 64 * one_doc["clock"]["core_hz"] / bps(one_doc)),
            **{f"{name(k)} (average)": (k, 64 * c) for k, c in cpb_avg.items()}}
    shares, beaten, inter, chain_held = judge(figs)
    print("instruction-level lower bounds (tma bench --preset sha; the largest term that no figure of "
          "this run beats): one stream "
          + (f"{b['one_stream_cycles_per_block']/64:.3f} c/B (latency chain; K streams: at least that / K)"
             if chain_held else "n/a (the latency chain was beaten)")
          + ", interleaved "
          + (f"{inter[1]/64:.3f} c/B (bound by {inter[0]})" if inter else "n/a (every term was beaten)"))
    ref = b.get("reference")
    if ref:
        print(f"reference, not a bound: a straightforward schedule of this mix ({ref['name']}) runs at "
              f"{ref['cycles']/64:.3f} c/B")
    print("derivation of the terms (tma bench --preset sha):")
    for line in b["derivation"]:
        if not line.startswith("interleaved bound:"):  # the bench's alone; the bound is above
            print(f"  {line}")
    for t, c, by, m in beaten:
        print(f"NOT A LOWER BOUND: the model's term {t} ({c:.1f} cycles/block = {c/64:.3f} cycles/byte) "
              f"was beaten by {by} ({m:.1f} cycles/block = {m/64:.3f} cycles/byte): it is not a lower bound")
    # Each share with its bound, the binding term named where it is not the interleaved one.
    of = lambda n: (f"{n} {100*shares[n][1]:.0f}% of {shares[n][0][1]/64:.3f}"
                    + ("" if shares[n][0] == inter else f" ({shares[n][0][0]})")
                    if n in shares else f"{n} n/a")
    print("of bound (fastest pass): " + ", ".join(of(name(k)) for k in [1] + widths))
    print("of bound (averages): " + ", ".join(of(f"{name(k)} (average)") for k in [1] + widths))
    wide = [k for k in widths if 4 <= k <= 8]
    kbest = min(wide, key=lambda k: cpb[k])
    kall = min(widths, key=lambda k: cpb[k])
    print(f"widest interleave that pays off here: {kall} streams ({cpb[kall]:.3f} c/B; "
          f"tma's DEFAULT_LANES is what `tma sha256sum` uses)")
    # The OpenSSL ratio is one of bytes per second (no clock in it); the c/B it needs uses the
    # interleaved run's own core clock, like its c/B.
    hz_k = docs[kbest]["clock"]["core_hz"]
    x_ossl = best(docs[kbest]) / ossl_pass
    c = cpb[kbest]
    share = shares.get(name(kbest))
    need_ossl = hz_k / (2.5 * ossl_pass)                # c/B needed for 2.5x OpenSSL
    if unconfirmed or share is None:
        # A bound measured through noise is too high: "of bound" and the 80% check would flatter.
        why = (f"{len(unconfirmed)} of its measured inputs did not converge (`{'`, `'.join(unconfirmed)}`)"
               if unconfirmed else "every term of it was beaten")
        print(f"BOUND UNCONFIRMED: {why}; the shares of it above and the 80% check are not figures "
              "to trust: run again on a quieter machine")
        print(f"target interleaved, fastest pass (best of 4-8 streams: {kbest}, {c:.3f} c/B): 80% of bound: "
              f"UNKNOWN (bound unconfirmed); 2.5x openssl needs {need_ossl:.3f}: "
              f"{verdict(x_ossl >= 2.5)} ({x_ossl:.2f}x openssl)")
    else:
        bound_cpb = share[0][1] / 64.0
        need_bound = bound_cpb / 0.80                   # c/B needed for 80% of the bound
        stricter = min(need_bound, need_ossl)
        print(f"target interleaved, fastest pass (best of 4-8 streams: {kbest}, {c:.3f} c/B) <= {stricter:.3f} c/B "
              f"[80% of the bound {bound_cpb:.3f} ({share[0][0]}) needs {need_bound:.3f}, 2.5x openssl needs "
              f"{need_ossl:.3f}; the stricter]: {verdict(c <= need_bound and x_ossl >= 2.5)} "
              f"({100*share[1]:.0f}% of bound, {x_ossl:.2f}x openssl)")
        ka = min(wide, key=lambda k: cpb_avg[k])
        ca = cpb_avg[ka]
        xa = bps(docs[ka]) / ossl
        sa = shares.get(f"{name(ka)} (average)")
        if sa:
            need_ba = sa[0][1] / 64.0 / 0.80
            need_a = min(need_ba, docs[ka]["clock"]["core_hz"] / (2.5 * ossl))
            print(f"  the same on averages (whole run vs openssl speed; {ka} streams, {ca:.3f} c/B <= {need_a:.3f}): "
                  f"{verdict(ca <= need_ba and xa >= 2.5)} ({100*sa[1]:.0f}% of bound, {xa:.2f}x openssl)")
    one = bps(load("ni1.json"))
    one_b = best(load("ni1.json"))
    print(f"target SHA-NI 1 stream >= openssl: {verdict(one >= ossl)} ({one/ossl:.2f}x on averages, "
          f"{one_b/ossl_pass:.2f}x on the fastest pass)")
print(f"many files (tma sha256sum vs coreutils, reading included): {tools['tma4']/tools['cu4']:.1f}x on "
      f"4 equal files, {tools['tmam']/tools['cum']:.1f}x on {mixed_n} files of mixed sizes")
# Like for like: both tools hashing the same file, reading included, least task-clock of 3 runs.
port = bps(p)
print(f"target portable >= coreutils per CPU second: {verdict(tools['tmap'] >= tools['cu'])} "
      f"(tma sha256sum --impl portable {tools['tmap']/tools['cu']:.2f}x coreutils sha256sum on the "
      f"same file; the hashing alone, tma workload's whole run: {port/tools['cu']:.2f}x)")
PY
