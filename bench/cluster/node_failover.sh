#!/usr/bin/env bash
# Node failover of `keel cluster`: how long until a lost node process is
# seen (detection) and until its shards and workers serve again on the other
# nodes (kill -> training resumed).
#   bench/cluster/node_failover.sh [KEEL_BINARY] [RUNS]
# kill9: SIGKILL closes the node's sockets, so the loss is seen at once. Its
# ceiling is measured in the same run: how long a plain process takes to see
# a loopback TCP peer killed with SIGKILL (build/bench/cluster/tcp_peer_loss).
# stop: SIGSTOP closes nothing, so only the middleman's connection timeout
# finds it. Nothing measured bounds that; the script prints the configured
# timeout plus one heartbeat interval beside it, labelled "configured", and
# no ratio.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
keel="${1:-$root/build/demos/keel}"
runs="${2:-3}"
probe="$(dirname "$keel")/../bench/cluster/tcp_peer_loss"
[ -x "$keel" ] || { echo "node_failover: no keel binary at $keel (build first: bash scripts/build.sh)" >&2; exit 1; }
[ -x "$probe" ] || { echo "node_failover: no $probe (build first: bash scripts/build.sh)" >&2; exit 1; }

probe_out="$("$probe" 20)"
echo "ceiling of kill9, measured now: $probe_out"
tcp_ms="$(sed -n 's/.*median \([0-9.]*\) ms.*/\1/p' <<<"$probe_out")"
printf '%-6s %12s %11s %5s %14s %14s %-24s %7s\n' fault heartbeat_ms timeout_ms runs detect_ms_med resumed_ms_med ceiling_ms ratio
for hb in 50 100 200; do
  timeout_ms=$((hb * 4))
  for fault in kill9 stop; do
    detect=()
    resumed=()
    for ((i = 0; i < runs; i++)); do
      out="$("$keel" cluster --nodes 3 --node-heartbeat-ms "$hb" --node-timeout-ms "$timeout_ms" \
               --model probe --steps 3000 --checkpoint-every 50 --faults "$fault:node:1@500" 2>/dev/null)"
      line="$(grep -F "node:1 $fault:node:1@500" <<<"$out" || true)"
      if [ -z "$line" ]; then
        echo "node_failover: no recovery line for $fault (hb $hb ms):" >&2
        echo "$out" >&2
        exit 1
      fi
      detect+=("$(sed -n 's/.*seen down after \([0-9.]*\) ms.*/\1/p' <<<"$line")")
      resumed+=("$(sed -n 's/.*serving again after \([0-9.]*\) ms.*/\1/p' <<<"$line")")
    done
    med() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    d="$(med "${detect[@]}")"
    r="$(med "${resumed[@]}")"
    if [ "$fault" = kill9 ]; then
      ceiling="$tcp_ms measured (tcp)"
      ratio="$(awk -v d="$d" -v c="$tcp_ms" 'BEGIN {printf "%.1f", d / c}')"
    else
      ceiling="$((timeout_ms + hb)) configured"
      ratio="-"
    fi
    printf '%-6s %12d %11d %5d %14s %14s %-24s %7s\n' "$fault" "$hb" "$timeout_ms" "$runs" "$d" "$r" "$ceiling" "$ratio"
  done
done
