#!/usr/bin/env bash
# scripts/fuzz.sh [--release] SECONDS [TARGET...]: fuzz tma's parsers with afl (cargo-afl,
# stable toolchain), SECONDS per target, one target after the other (all of them when none is
# named), each under `nice -n 19` (the machine is shared).
#
# * installs cargo-afl (`cargo install --locked cargo-afl`, which builds its AFL++ runtime)
#   when `cargo afl` is missing; with FUZZ_SKIP_OK=1 a failed install prints
#   "skipped: <reason>" and exits 0;
# * builds the targets of fuzz/ (its own workspace, target dir fuzz/target): `cargo afl
#   build` (fuzz/target/debug), or with --release (or FUZZ_RELEASE=1) `cargo afl build
#   --release` (fuzz/target/release; fuzz/Cargo.toml's release profile keeps overflow checks
#   and debug assertions), for long runs;
# * writes each target's seeds to fuzz/out/seeds/<target> (fuzz/src/bin/mkseeds.rs: the test
#   fixtures, fuzz/seeds/<target>/ and the generated ones that crates/tma-fuzz/src/seeds.rs
#   lists, seeds over 8 KiB, 32 KiB for perf.data, left out); `cargo test -p tma-fuzz` replays
#   the same seeds and the saved crashes without afl (scripts/test.sh's short fuzz pass);
# * runs `cargo afl fuzz -V SECONDS -t 1000` per target (output in fuzz/out/<target>; with
#   FUZZ_EXECS=N also `-E N`: stop after N executions, whichever comes first; inputs are
#   capped at FUZZ_MAX_LEN bytes, default 16 KiB, 64 KiB for perf.data; FUZZ_RESUME=1 goes
#   on with the campaign already in fuzz/out/<target>, its executions counted) and prints
#   executions, executions per second, wall time and coverage (afl's bitmap_cvg and
#   edges_found of total_edges, from fuzzer_stats); the targets' scratch files go to a
#   directory in /dev/shm (a file rewritten on disk for each input cost milliseconds);
# * FUZZ_JOBS=N runs N afl instances per target at once (a main one and N-1 secondaries
#   sharing finds; N cores): executions and their rate are summed, FUZZ_EXECS is the total;
# * FUZZ_OUT=DIR puts seeds, campaigns and logs under DIR instead of fuzz/out (a short run
#   in, say, fuzz/out-short never wipes a long campaign);
# * fails when a target saved a crash, or a hang that reproduces (a run over 1 s outside
#   afl too; the harness aborts such a run), and prints the command that reproduces it.
#   A timeout afl saw that does not reproduce alone is reported, not failed (the machine is
#   shared). The targets, and the bounds each input is held to, are in fuzz/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

ALL=(perf_stat perf_data perf_data_z docs http tracefs proc sysfs pprof expr evaluate)
release=${FUZZ_RELEASE:-0}
if [ "${1:-}" = --release ]; then
  release=1
  shift
fi
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh [--release] SECONDS [TARGET...]  (targets: ${ALL[*]})" >&2
  exit 2
fi
secs=$1
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${ALL[@]}")
for t in "${targets[@]}"; do
  [[ " ${ALL[*]} " == *" $t "* ]] || { echo "unknown target $t (targets: ${ALL[*]})" >&2; exit 2; }
done

skip_or_fail() {
  if [ "${FUZZ_SKIP_OK:-}" = 1 ]; then
    echo "skipped: $1"
    exit 0
  fi
  echo "fuzz.sh: $1" >&2
  exit 1
}

# afl on these machines: no CPU frequency governor to check, and the kernel's core_pattern
# may pipe core dumps to a helper; no curses UI; no pinning (the cores are shared).
export AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 AFL_NO_AFFINITY=1

if ! cargo afl --version >/dev/null 2>&1; then
  echo "installing cargo-afl (builds the AFL++ runtime; a few minutes)"
  cargo install --locked cargo-afl >/tmp/tma-fuzz-install.log 2>&1 ||
    skip_or_fail "cargo-afl could not be installed (cargo install --locked cargo-afl failed; log in /tmp/tma-fuzz-install.log)"
fi
cargo afl --version >/dev/null 2>&1 || skip_or_fail "cargo afl does not run after installing cargo-afl"

profile=debug
build=(cargo afl build --quiet)
if [ "$release" = 1 ]; then
  profile=release
  build+=(--release)
fi
echo "building the fuzz targets (fuzz/, ${build[*]})"
build_start=$SECONDS
(cd fuzz && nice -n 19 "${build[@]}") || {
  echo "fuzz.sh: the fuzz targets do not build" >&2
  exit 1
}
echo "built in $((SECONDS - build_start)) s"
bin=$root/fuzz/target/$profile

# Each named target's seeds, remade in $outroot/seeds/<target> by fuzz/'s mkseeds (the list is
# crates/tma-fuzz/src/seeds.rs; only the named targets' directories are remade: another
# fuzz.sh may be starting one of its own targets from this directory at the same time).
outroot=${FUZZ_OUT:-$root/fuzz/out}
case $outroot in /*) ;; *) outroot=$root/$outroot ;; esac
seeds=$outroot/seeds
mkdir -p "$seeds"
"$bin/mkseeds" "$seeds" "${targets[@]}" >/dev/null

jobs=${FUZZ_JOBS:-1}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: FUZZ_JOBS must be a number of instances (1 or more), got '$jobs'" >&2; exit 2; }
# afl's instance names: with FUZZ_JOBS=N > 1, `default` is the main instance (-M) and s1...
# the secondaries (-S); a campaign started with one instance goes on as the main one.
names=(default)
for ((j = 1; j < jobs; j++)); do names+=("s$j"); done

# A value of one instance's fuzzer_stats (empty when it has none).
stat_of() { awk -F' *: *' -v k="$2" '$1 == k {print $2}' "$1/fuzzer_stats" 2>/dev/null; }

failed=0
summary=()
for t in "${targets[@]}"; do
  out=$outroot/$t
  resume=0
  if [ "${FUZZ_RESUME:-0}" = 1 ] && [ -f "$out/default/fuzzer_stats" ]; then
    # Go on with the campaign in fuzz/out/<target>: afl keeps each instance's queue and
    # counts the executions of the earlier sittings in execs_done (and so in -E).
    resume=1
    done_before=0
    for n in "${names[@]}"; do done_before=$((done_before + $(stat_of "$out/$n" execs_done || echo 0))); done
    echo "== $t: resuming the campaign in ${out#"$root"/} ($done_before executions so far)"
    rm -rf "$out.tmp"
  else
    rm -rf "$out" "$out.tmp"
  fi
  scratch=$(mktemp -d /dev/shm/tma-fuzz-XXXXXX 2>/dev/null || { mkdir -p "$out.tmp" && echo "$out.tmp"; })
  dict=()
  [ -f "fuzz/dict/$t.dict" ] && dict=(-x "fuzz/dict/$t.dict")
  # The longest input afl may make (-G): 16 KiB, 64 KiB for perf.data. Without a cap a long
  # run drifts to inputs of tens of KiB (a pprof run went from 9,000 to 250 executions a
  # second on 48 KiB inputs) that reach no code a shorter one does not.
  maxlen=${FUZZ_MAX_LEN:-16384}
  [[ $t == perf_data* ]] && maxlen=${FUZZ_MAX_LEN:-65536}
  echo "== $t: fuzzing for ${secs}s${FUZZ_EXECS:+ or $FUZZ_EXECS executions}, $jobs instance(s) (output in ${out#"$root"/})"
  log=$outroot/$t.log
  started=$SECONDS
  # FUZZ_EXECS is the campaign's total: what is left of it is shared out between the
  # instances (afl's -E counts one instance's executions, earlier sittings included).
  left=
  if [ -n "${FUZZ_EXECS:-}" ]; then
    sofar=0
    for n in "${names[@]}"; do sofar=$((sofar + $(stat_of "$out/$n" execs_done || echo 0))); done
    left=$(((FUZZ_EXECS - sofar + jobs - 1) / jobs))
    [ "$left" -gt 0 ] || left=1
  fi
  pids=()
  for n in "${names[@]}"; do
    input=(-i "$seeds/$t")
    [ "$resume" = 1 ] && [ -f "$out/$n/fuzzer_stats" ] && input=(-i -)
    role=()
    [ "$jobs" -gt 1 ] && { [ "$n" = default ] && role=(-M default) || role=(-S "$n"); }
    execs=()
    [ -n "$left" ] && execs=(-E $(($(stat_of "$out/$n" execs_done || echo 0) + left)))
    ilog=$log
    [ "$n" = default ] || ilog=${log%.log}.$n.log
    TMPDIR=$scratch nice -n 19 cargo afl fuzz "${input[@]}" -o "$out" "${role[@]}" -V "$secs" "${execs[@]}" \
      -G "$maxlen" -t 1000 "${dict[@]}" -- "$bin/$t" >"$ilog" 2>&1 &
    pids+=($!)
  done
  afl_failed=0
  for p in "${pids[@]}"; do wait "$p" || afl_failed=1; done
  if [ "$afl_failed" = 1 ]; then
    rm -rf "$scratch"
    tail -n 30 "$log"
    echo "fuzz.sh: afl stopped with an error on $t (logs: ${log#"$root"/}${names[1]:+ and the s<N> logs beside it})" >&2
    failed=1
    summary+=("$t: afl failed")
    continue
  fi
  rm -rf "$scratch"
  wall=$((SECONDS - started))
  # Executions and their rate summed over the instances; coverage, corpus and edges are the
  # main instance's (it imports what the others find).
  execs_done=0 rate=0
  for n in "${names[@]}"; do
    execs_done=$((execs_done + $(stat_of "$out/$n" execs_done || echo 0)))
    rate=$(awk -v a="$rate" -v b="$(stat_of "$out/$n" execs_per_sec)" 'BEGIN {printf "%.2f", a + b}')
  done
  main=$out/default
  # An in-place resume moves earlier sittings' finds to crashes.<date>/ and hangs.<date>/.
  crashes=$(find "$out" -path '*/crashes*/id:*' -type f 2>/dev/null | wc -l)
  hangs=$(find "$out" -path '*/hangs*/id:*' -type f 2>/dev/null | wc -l)
  line=$(printf '%-11s %12s execs %8s execs/s %6s s  coverage %s (%s of %s edges)  corpus %s  crashes %s  hangs %s%s' \
    "$t" "$execs_done" "$rate" "$wall" "$(stat_of "$main" bitmap_cvg)" "$(stat_of "$main" edges_found)" \
    "$(stat_of "$main" total_edges)" "$(stat_of "$main" corpus_count)" "$crashes" "$hangs" \
    "$([ "$jobs" -gt 1 ] && echo "  ($jobs instances)")")
  echo "$line"
  summary+=("$line")
  for c in "$out"/*/crashes*/id:*; do
    [ -f "$c" ] || continue
    echo "CRASH in $t: $c"
    echo "  reproduce: fuzz/target/$profile/$t < '$c'"
    failed=1
  done
  for h in "$out"/*/hangs*/id:*; do
    [ -f "$h" ] || continue
    # The harness aborts a run over 1 s: a hang that reproduces alone fails like a crash.
    if ! timeout 10 "$bin/$t" <"$h" >/dev/null 2>&1; then
      echo "HANG in $t (over 1 s when run alone too): $h"
      echo "  reproduce: fuzz/target/$profile/$t < '$h'"
      failed=1
    else
      echo "note: afl timed out on $h, but it runs in under 1 s alone (a busy machine)"
    fi
  done
done

echo
echo "fuzz summary (${secs}s per target):"
printf '  %s\n' "${summary[@]}"
exit $failed
