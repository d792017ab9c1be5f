#!/usr/bin/env bash
# MNIST MLP across keel node processes: samples/s of `keel cluster` (3 nodes,
# defaults) with pushes and pulls on the nodes' data plane and with them on
# CAF's middleman (--no-data-plane), beside the same training in one
# process (`keel train`: no bytes cross a process there). That reference is
# keel itself, not a ceiling independent of it: the ratio is what running
# across processes costs.
# Every run must end bit-identical (BSP): the script checks params_sha256.
#   bench/cluster/cluster_training.sh [KEEL_BINARY] [EPOCHS] [RUNS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
keel="${1:-$root/build/demos/keel}"
epochs="${2:-1}"
runs="${3:-3}"
[ -x "$keel" ] || { echo "cluster_training: no keel binary at $keel (build first: bash scripts/build.sh)" >&2; exit 1; }

best() { sort -g | tail -1; }
rate() { sed -n 's/.*done in [0-9.]* s, \([0-9.]*\) samples\/s.*/\1/p' <<<"$1"; }
sha() { sed -n 's/.*params_sha256 \([0-9a-f]*\).*/\1/p' <<<"$1"; }

declare -A rates
ref=""
for ((i = 0; i < runs; i++)); do
  for mode in one cluster caf; do
    case $mode in
      one) out="$("$keel" train --epochs "$epochs" --quiet 2>&1)" ;;
      cluster) out="$("$keel" cluster --nodes 3 --epochs "$epochs" --quiet 2>&1)" ;;
      caf) out="$("$keel" cluster --nodes 3 --no-data-plane --epochs "$epochs" --quiet 2>&1)" ;;
    esac
    r="$(rate "$out")"
    s="$(sha "$out")"
    if [ -z "$r" ] || [ -z "$s" ]; then
      echo "cluster_training: $mode run failed:" >&2
      echo "$out" >&2
      exit 1
    fi
    [ -z "$ref" ] && ref="$s"
    if [ "$s" != "$ref" ]; then
      echo "cluster_training: $mode run ended with params_sha256 $s, not $ref" >&2
      exit 1
    fi
    rates[$mode]+="$r"$'\n'
  done
done
one="$(best <<<"${rates[one]}")"
printf 'MNIST MLP, %s epoch(s), keel defaults (2 shards, 2 workers, BSP), best of %s runs, all bit-identical\n' "$epochs" "$runs"
printf 'reference: keel train in one process (keel itself, not an independent ceiling): the ratio is what\n'
printf 'running across node processes costs\n'
printf '%-52s %12s %12s %7s\n' measurement samples/s reference ratio
for mode in cluster caf; do
  v="$(best <<<"${rates[$mode]}")"
  label="keel cluster, 3 node processes, data plane"
  [ "$mode" = caf ] && label="keel cluster, 3 node processes, CAF middleman"
  printf '%-52s %12.0f %12.0f %7.2f\n' "$label" "$v" "$one" "$(awk -v a="$v" -v b="$one" 'BEGIN { print a / b }')"
done
