#!/usr/bin/env bash
# Installs this build of keel into a temporary prefix, builds the embedding
# example (demos/embedding) against it with find_package(keel), and runs it.
# Usage: embedding_check.sh BUILD_DIR SOURCE_DIR [KEEL_PROGRAM]
# (with KEEL_PROGRAM it also runs cluster_loop against keel cluster)
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
# The application's loop in a process of its own against keel cluster
# (cluster_loop.cpp, keel::cluster_client): a shard killed halfway, every
# push applied once (the probe's count, checked by the coordinator).
if [ -n "${3:-}" ]; then
  keel="$3"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret"
  chmod 600 "$work/secret"
  "$keel" cluster --nodes 2 --secret-file "$work/secret" --application-loop --model probe --lr 1 --steps 200 \
    --checkpoint-every 20 --checkpoint-dir "$work/cluster-run" --kill shard:0@100 > "$work/cluster.log" 2>&1 &
  coordinator=$!
  join=""
  for _ in $(seq 1 300); do
    join="$(sed -n 's/.*join node:0 at \([0-9.]*:[0-9]*\) with.*/\1/p' "$work/cluster.log")"
    [ -n "$join" ] && break
    kill -0 "$coordinator" 2>/dev/null || break
    sleep 0.1  # polling the coordinator's log for its address, not synchronising on time
  done
  [ -n "$join" ] || { cat "$work/cluster.log"; fail "keel cluster did not name a node to join"; }
  status=0
  "$work/build/cluster_loop" "$join" "$work/secret" 0,1 > "$work/client.log" 2>&1 || status=$?
  cat "$work/client.log"
  cstatus=0
  wait "$coordinator" || cstatus=$?
  cat "$work/cluster.log"
  [ "$status" = 0 ] || fail "cluster_loop exited with status $status"
  [ "$cstatus" = 0 ] || fail "keel cluster exited with status $cstatus"
  grep -q "^cluster_loop: the job let its workers go$" "$work/client.log" || fail "cluster_loop did not end with its job"
  grep -q "fault shard:0: killed" "$work/cluster.log" || fail "shard:0 was not killed"
  grep -q "every parameter equals the 400 pushes its shard acknowledged" "$work/cluster.log" ||
    fail "the cluster's probe does not count every push once"
fi
echo "embedding_check: passed"
