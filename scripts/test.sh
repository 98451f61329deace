#!/usr/bin/env bash
# The whole test suite (the README's second set-up command).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all -- --check
cargo test --workspace --all-targets --locked --no-fail-fast
