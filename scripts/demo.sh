#!/usr/bin/env bash
# Installs what is missing, builds keel, fetches and verifies MNIST, and runs
# the embedded demo: `keel train` (MNIST MLP, 2 shards, 2 workers, BSP,
# checkpoints in a temporary directory) with a shard and a worker killed
# halfway. Arguments replace the demo's flags (try --help).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh" --target keel
bash "$root/scripts/fetch-mnist.sh"
if [ "$#" -eq 0 ]; then
  set -- --kill shard:0@step=1200,worker:1@step=2400
fi
exec "$root/build/demos/keel" train "$@"
