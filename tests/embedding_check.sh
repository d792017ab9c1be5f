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
# Exactly the public API is installed: <keel/keel.hpp> and every keel header
# it reaches through its includes, no more (an implementation header
# installed by mistake) and no less (an application could not compile).
inc="$work/prefix/include/keel"
test -f "$inc/keel.hpp" || { echo "embedding_check: keel/keel.hpp is not installed" >&2; exit 1; }
declare -A reached=([keel.hpp]=1)
queue=(keel.hpp)
while [ ${#queue[@]} -gt 0 ]; do
  header="${queue[0]}"
  queue=("${queue[@]:1}")
  while read -r dep; do
    [ -n "$dep" ] || continue
    [ -f "$inc/$dep" ] || { echo "embedding_check: $header includes $dep, which is not installed" >&2; exit 1; }
    if [ -z "${reached[$dep]:-}" ]; then
      reached[$dep]=1
      queue+=("$dep")
    fi
  done < <(sed -n 's/^#include "\(.*\)"/\1/p' "$inc/$header")
done
while read -r installed; do
  installed="${installed#"$inc"/}"
  if [ -z "${reached[$installed]:-}" ]; then
    echo "embedding_check: $installed is installed, but <keel/keel.hpp> does not include it: not public API" >&2
    exit 1
  fi
done < <(find "$inc" -name '*.hpp')
cmake -S "$src/demos/embedding" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  -DCMAKE_BUILD_TYPE=Release > "$work/configure.log" || { cat "$work/configure.log"; exit 1; }
cmake --build "$work/build" -j 2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }
# The example must succeed, reach its target, and have really been hit by
# both planned kills and recovered from them (restarts or a rollback).
status=0
"$work/build/line_fit" > "$work/run.log" 2>&1 || status=$?
cat "$work/run.log"
fail() { echo "embedding_check: $1" >&2; exit 1; }
[ "$status" = 0 ] || fail "line_fit exited with status $status"
grep -q "^line_fit: fit reached its target$" "$work/run.log" || fail "line_fit did not reach its target"
grep -q "fault shard:1: killed" "$work/run.log" || fail "shard:1 was not killed"
grep -q "fault worker:0: killed" "$work/run.log" || fail "worker:0 was not killed"
grep -q "^line_fit: planned faults: 2 injected, 0 not$" "$work/run.log" || fail "not every planned fault took effect"
grep -Eq " (restart|rollback) " "$work/run.log" || fail "no restart or rollback followed the kills"
# The application's own loop (own_loop.cpp): its fit reaches the target
# through a shard kill, every push applied once.
status=0
"$work/build/own_loop" > "$work/own.log" 2>&1 || status=$?
cat "$work/own.log"
[ "$status" = 0 ] || fail "own_loop exited with status $status"
grep -q "^own_loop: fit reached its target$" "$work/own.log" || fail "own_loop did not reach its target"
grep -q "^own_loop: killed shard:1 after step 100$" "$work/own.log" || fail "own_loop did not kill shard:1"
grep -Eq "shard:1 restarts [1-9]" "$work/own.log" || fail "shard:1 did not restart"
echo "embedding_check: passed"
