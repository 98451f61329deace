#!/usr/bin/env bash
# The whole test suite (the README's second set-up command; .ci/run runs it too).
#
# First the style and lint gates: `cargo fmt --check`, then clippy on every target with
# warnings as errors (the lint policy, unsafe included, is [workspace.lints] in Cargo.toml).
#
# Tests that need a resource this machine lacks (hardware PMU, root, /dev/kvm, a peer tool)
# skip at run time and say why with a line starting "skipped:". cargo captures the output of
# passing tests, so the suite runs with --show-output and this script lists every skip with
# its reason at the end, instead of letting a skip look like a pass.
set -euo pipefail
cd "$(dirname "$0")/.."

# Free disk: a cold run writes about 9 GiB (target/ 6: the test build with line tables only,
# clippy's and rustdoc's output, measured 2026-12-07; the onednn venv 2; Debian packages the
# rest). A disk that fills midway fails the run with errors that do not name the cause (a
# truncated log, a write failure in the summary below, exit 2), so say it here, at the top of
# the output, and again at the end.
free_gib() { df -Pk "$1" 2>/dev/null | awk 'NR == 2 {printf "%d", $4 / 1048576}'; }
disk_dir="${CARGO_TARGET_DIR:-target}"
[ -d "$disk_dir" ] || disk_dir=.
need_gib=9
[ -d "$disk_dir/debug" ] && need_gib=4 # a warm build rewrites the workspace's own crates only
have_gib=$(free_gib "$disk_dir")
if [ -n "$have_gib" ] && [ "$have_gib" -lt "$need_gib" ]; then
  echo "warning: only $have_gib GiB free on the disk of $disk_dir; this run may need about" \
    "$need_gib GiB and fails midway when the disk fills (free space first, e.g. cargo clean)"
fi

# ensure prometheus: the `tma serve` end-to-end test scrapes with a real Prometheus server
# (Debian package `prometheus`, which also brings promtool). Installed when running as root
# and missing; if that fails the tests that need it skip and say so.
if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing the Debian package prometheus (for the tma serve end-to-end test)"
    (DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 ||
      { apt-get update >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1; }) ||
      echo "could not install prometheus; the tests that need it will skip"
  else
    echo "prometheus/promtool not found and not root: the tests that need them will skip"
  fi
fi

# ensure chromium: the `tma report` browser test (crates/tma-report/tests/browser.rs) opens the
# pages in headless Chromium (Debian package `chromium`). Installed when running as root and
# missing; if that fails the test skips and says so.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing the Debian package chromium (for the tma report browser test)"
    (DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 ||
      { apt-get update >/dev/null 2>&1 &&
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends chromium >/dev/null 2>&1; }) ||
      echo "could not install chromium; the browser test will skip"
  else
    echo "chromium not found and not root: the browser test will skip"
  fi
fi

# ensure oneDNN: crates/tma-cli/tests/onednn.rs and regions_onednn.rs drive Debian's oneDNN 2.6
# (package libdnnl-dev, with its headers for the C++ fixture) and the PyPI `onednn` wheel
# (oneDNN 3.x, a SYCL build with ITT tasks; about 2 GB with its runtime, 30 s to install on the
# 2-core VM with a fast mirror), in a virtual environment in the target directory. The wheel
# installs in the background while the lints run; the tests skip, saying so, without them.
onednn_venv="${CARGO_TARGET_DIR:-target}/onednn-venv"
onednn_pid=
if [ ! -e /usr/include/dnnl.hpp ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing the Debian package libdnnl-dev (for the oneDNN tests)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libdnnl-dev >/dev/null 2>&1 ||
    echo "could not install libdnnl-dev; the tests that need it will skip"
fi
# Debian's python3 makes virtual environments only with python3-venv (ensurepip).
if ! python3 -c 'import ensurepip' >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3-venv >/dev/null 2>&1 ||
    echo "could not install python3-venv; the test that needs the onednn wheel will skip"
fi
if [ ! -e "$onednn_venv/lib/libdnnl.so.3" ] && command -v python3 >/dev/null 2>&1; then
  echo "installing the PyPI onednn wheel into $onednn_venv in the background (log: $onednn_venv.log)"
  mkdir -p "$(dirname "$onednn_venv")" # a fresh checkout has no target directory yet
  (rm -rf "$onednn_venv" && python3 -m venv "$onednn_venv" &&
    "$onednn_venv/bin/pip" install --disable-pip-version-check -q onednn) >"$onednn_venv.log" 2>&1 &
  onednn_pid=$!
fi

cargo fmt --all -- --check
cargo clippy --workspace --all-targets --locked -- -D warnings
# The API docs, with a broken intra-doc link (or any other rustdoc warning) an error.
RUSTDOCFLAGS='-D warnings' cargo doc --workspace --no-deps --locked
if [ -n "$onednn_pid" ]; then
  wait "$onednn_pid" || echo "could not install the onednn wheel (see $onednn_venv.log); the test that needs it will skip"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The fuzz targets' seeds and saved crashes are replayed here as ordinary tests, under the
# targets' bounds (crates/tma-fuzz, a few seconds); afl campaigns are run on purpose with
# scripts/fuzz.sh (fuzz/README.md).
set +e
cargo test --workspace --all-targets --locked --no-fail-fast -- --show-output >"$log" 2>&1
status=$?
set -e
# The log without the captured output of passing tests (their "successes:" sections).
awk '/^successes:$/ {hide = 1} /^(failures:$|test result:|     Running |error)/ {hide = 0} !hide' "$log"
echo
echo "Skipped here (the resource is absent), with the reasons the tests gave:"
awk '/^---- .* stdout ----$/ {name = $2} /skipped:/ {sub(/^[ \t]+/, ""); print "  " name ": " $0}' "$log" |
  sort -u
grep -E "^test .* \.\.\. ignored" "$log" | sed 's/^test /  ignored: /' | sort -u || true
left_gib=$(free_gib "$disk_dir")
if [ "$status" != 0 ] && [ -n "$left_gib" ] && [ "$left_gib" -lt 1 ]; then
  echo "the disk of $disk_dir is full ($left_gib GiB free): the failures above may be that"
fi
exit $status
