#!/usr/bin/env bash
# Installs this build of keel into a temporary prefix, builds the embedding
# example (demos/embedding) against it with find_package(keel), and runs it.
# Usage: embedding_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build="$1"
src="$2"
work="$(mktemp -d /tmp/keel-embed-XXXXXX)"
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
# Only the public API is installed: implementation headers stay inside.
for private in actors/job_impl.hpp actors/worker_state.hpp actors/parameter_shard.hpp \
               models/mnist_data.hpp supervision/supervisor.hpp storage/snapshot_store.hpp; do
  if [ -e "$work/prefix/include/keel/$private" ]; then
    echo "embedding_check: $private is installed, but it is not public API" >&2
    exit 1
  fi
done
test -f "$work/prefix/include/keel/keel.hpp" || { echo "embedding_check: keel/keel.hpp is not installed" >&2; exit 1; }
cmake -S "$src/demos/embedding" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
"$work/build/line_fit"
