#!/usr/bin/env bash
# Installs what is missing, then configures and builds keel incrementally.
#   scripts/build.sh              Release build in build/
#   KEEL_SANITIZE=1 scripts/build.sh   ASan+UBSan build in build-asan/
# Extra arguments are passed to `cmake --build` (e.g. --target keel).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

bash scripts/install-deps.sh

if [ "${KEEL_SANITIZE:-0}" = 1 ]; then
  build_dir="${KEEL_BUILD_DIR:-build-asan}"
  flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DKEEL_SANITIZE=ON -DKEEL_BUILD_BENCH=OFF)
else
  build_dir="${KEEL_BUILD_DIR:-build}"
  flags=(-DCMAKE_BUILD_TYPE=Release)
fi
# ccache keeps what any clone of keel on this machine compiled: paths inside
# the clone are hashed relative to its root and the build directory's path
# is left out, so a fresh clone (CI's, a worktree) compiles only the sources
# that differ from an earlier build's.
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_BASEDIR="$root" CCACHE_NOHASHDIR=1
  export CCACHE_MAXSIZE="${CCACHE_MAXSIZE:-20G}"
  flags+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
# Warnings are errors in CI, so a warning never lands.
if [ "${CI:-}" = true ]; then
  flags+=(-DKEEL_WERROR=ON)
fi

if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  cmake -S . -B "$build_dir" "${flags[@]}"
fi
cmake --build "$build_dir" -j "$(nproc)" "$@"
