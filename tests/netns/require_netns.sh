# Sourced by the network-namespace tests: sets `harness` to
# scripts/netns-cluster.sh and exits 77 (skipped) where network namespaces
# are unavailable, except on CI (CI=true), where that fails the test.
harness="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../scripts" && pwd)/netns-cluster.sh"
if ! why="$(bash "$harness" available)"; then
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $why (CI must run the network-namespace tests)"
    exit 1
  fi
  echo "SKIPPED: $why"
  exit 77
fi
