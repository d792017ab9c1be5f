#!/usr/bin/env bash
# Installs what is missing, builds keel, and runs the whole test suite
# through CTest (the slow tier, named "<layer> (slow): ...", is left to
# `ctest -R '(slow)'`).
#   scripts/test.sh                    Release build
#   KEEL_SANITIZE=1 scripts/test.sh    ASan+UBSan build
# Extra arguments are passed to ctest (e.g. -R '^storage:').
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
if [ "${KEEL_SANITIZE:-0}" = 1 ]; then
  build_dir="${KEEL_BUILD_DIR:-build-asan}"
  export LSAN_OPTIONS="suppressions=$root/tests/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
else
  build_dir="${KEEL_BUILD_DIR:-build}"
fi
cd "$root/$build_dir"
ctest --output-on-failure -j "$(nproc)" -E '\(slow\)' "$@"
