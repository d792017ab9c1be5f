#!/usr/bin/env bash
# Real network faults against a keel cluster of three node processes, each
# in a network namespace of its own (scripts/netns-cluster.sh), BSP with a
# fixed seed. Each scenario checks that nothing acknowledged was lost
# (pushes acked == applied) and that the parameters are bit-identical to a
# clean run in one process (params_sha256), plus what the scenario is about:
#   short     node 1 cut off for less than the failure timeout: no failover,
#             training goes on
#   long      node 1 cut off for longer: failover; the stale node stops its
#             old actors (and fencing keeps them from applying anything)
#   split     node 1 cut off from the coordinator only; the other nodes
#             still see both
#   oneway    what node 1 sends is dropped; it still receives
# Usage: partition_test.sh SCENARIO KEEL. Exit 77 (skipped) where network
# namespaces are unavailable, except on CI (CI=true), where that fails.
set -euo pipefail
scenario="$1"
keel="$2"
source "$(dirname "${BASH_SOURCE[0]}")/require_netns.sh"  # sets $harness, or skips

# Long enough to span the faults, short enough for CI's two cores.
flags=(--model sparse-lr --steps 300 --seed 11 --quiet)
timeout_ms=1500
case "$scenario" in
  short) faults="partition:node:1@40+400ms" ;;
  long) faults="partition:node:1@40+3000ms" ;;
  split) faults="split:node:1@40+3000ms" ;;
  oneway) faults="oneway:node:1@40+3000ms" ;;
  *) echo "unknown scenario $scenario"; exit 2 ;;
esac

keep="$(mktemp -d /tmp/keel-netns-test-XXXXXX)"
trap 'rm -rf "$keep"' EXIT

sha_of() { sed -n 's/.*params_sha256 \([0-9a-f]*\).*/\1/p' <<< "$1" | tail -1; }

clean="$("$keel" train "${flags[@]}" 2>&1)" || { echo "$clean"; echo "FAIL: the clean run failed"; exit 1; }
want="$(sha_of "$clean")"

status=0
out="$(KEEL_NETNS_KEEP="$keep" KEEL_NETNS_TIMEOUT_MS=$timeout_ms \
  bash "$harness" run "$keel" 3 "${flags[@]}" --faults "$faults" 2>&1)" || status=$?
echo "$out"
echo "--- node 1's log:"
cat "$keep/node-1.err" 2>/dev/null || true

fail() { echo "FAIL ($scenario, $faults): $*"; exit 1; }
[ "$status" = 0 ] || fail "keel cluster exited $status"
grep -q "planned faults: 1 injected, 0 not" <<< "$out" || fail "the fault was not injected"
acked="$(sed -n 's/.*pushes acked \([0-9]*\), applied \([0-9]*\).*/\1 \2/p' <<< "$out" | tail -1)"
[ -n "$acked" ] || fail "no 'pushes acked N, applied M' line"
read -r a b <<< "$acked"
[ "$a" = "$b" ] || fail "pushes acked $a but applied $b"
got="$(sha_of "$out")"
[ "$got" = "$want" ] || fail "params_sha256 $got, the clean run's is $want"

# (--quiet prints no timeline: the restarts in the result line tell a failover.)
restarts="$(sed -n 's/.* \([0-9]*\) restarts, .*/\1/p' <<< "$out" | tail -1)"
case "$scenario" in
  short) [ "$restarts" = 0 ] || fail "a partition shorter than the failure timeout caused $restarts restarts" ;;
  *) [ "${restarts:-0}" -ge 1 ] || fail "the coordinator did not fail node 1 over (no restart)" ;;
esac
if [ "$scenario" = long ]; then
  grep -q "stopping its" "$keep/node-1.err" || fail "the stale node did not stop its old actors"
fi
echo "PASS ($scenario): acked $a == applied $b, params_sha256 $got as the clean run"
