#!/usr/bin/env bash
# A keel cluster's client process on a host of its own: three keel node
# processes and the coordinator in network namespaces (scripts/netns-cluster.sh),
# and the workers' loops (keel.connect, tests/netns/probe_client.py) in
# another, at an address only the namespaces have. Node 1 is cut off for
# longer than the failure timeout while the client trains: its shards fail
# over, the client's pushes to them are replayed, and the run ends with
# every push applied once (the probe's count) and parameters bit-identical
# to keel's own workers in one process.
# Usage: client_test.sh KEEL PYTHONPATH. Exit 77 (skipped) where network
# namespaces are unavailable, except on CI (CI=true), where that fails.
set -euo pipefail
keel="$1"
pythonpath="$2"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
source "$(dirname "${BASH_SOURCE[0]}")/require_netns.sh"  # sets $harness, or skips

flags=(--model probe --lr 1 --steps 300 --workers 2 --shards 3 --checkpoint-every 20 --quiet)
keep="$(mktemp -d /tmp/keel-netns-client-XXXXXX)"
trap 'rm -rf "$keep"' EXIT
sha_of() { sed -n 's/.*params_sha256 \([0-9a-f]*\).*/\1/p' <<< "$1" | tail -1; }

clean="$("$keel" train "${flags[@]}" --checkpoint-dir "$keep/clean" 2>&1)" ||
  { echo "$clean"; echo "FAIL: the clean run failed"; exit 1; }
want="$(sha_of "$clean")"

status=0
out="$(KEEL_NETNS_KEEP="$keep" KEEL_NETNS_TIMEOUT_MS=1500 \
  KEEL_NETNS_CLIENT="PYTHONPATH='$pythonpath' PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 '$here/probe_client.py'" \
  bash "$harness" run "$keel" 3 "${flags[@]}" --application-loop --checkpoint-dir "$keep/run" \
  --faults "partition:node:1@60+3000ms" 2>&1)" || status=$?
echo "$out"
echo "--- the client's log:"
cat "$keep/client.log" 2>/dev/null || true

fail() { echo "FAIL (client): $*"; exit 1; }
[ "$status" = 0 ] || fail "the run exited $status"
grep -q "planned faults: 1 injected, 0 not" <<< "$out" || fail "the partition was not injected"
grep -q "^probe_client: workers 0 and 1 ran their loops from 10.77.0.10:7000 at 10.77.0.5$" "$keep/client.log" ||
  fail "the client did not run its loops from its own namespace"
grep -q "every parameter equals the 600 pushes its shard acknowledged" <<< "$out" ||
  fail "the probe does not count every push once"
restarts="$(sed -n 's/.* \([0-9]*\) restarts, .*/\1/p' <<< "$out" | tail -1)"
[ "${restarts:-0}" -ge 1 ] || fail "node 1's shards were not failed over (no restart)"
got="$(sha_of "$out")"
[ "$got" = "$want" ] || fail "params_sha256 $got, keel's own workers' in one process is $want"
echo "PASS (client): $restarts restarts, every push once, params_sha256 $got as keel's own workers"
