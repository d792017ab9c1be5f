#!/usr/bin/env bash
# Runs a keel cluster whose processes each live in a network namespace of
# their own, so that the network between them can really fail: a node cut
# off (partition), a node cut off from the coordinator only (split), a node
# whose packets out are dropped while it still receives (oneway). Nothing
# is on 127.0.0.1 and nothing touches the host's network: a namespace "-sw"
# holds a bridge, and the coordinator (10.77.0.1) and every node
# (10.77.0.10 + N) are joined to it by a veth pair; the addresses exist only
# inside those namespaces. Needs root, `ip netns` (iproute2) and `nft`
# (nftables); scripts/install-deps.sh installs both.
#
#   netns-cluster.sh available
#       exit 0 when namespaces and nftables work here, else 1 saying why
#   netns-cluster.sh run KEEL NODES [keel cluster flags...]
#       starts NODES `keel node` processes (KEEL is the keel binary), runs
#       `keel cluster --connect ...` over them with --node-fault-command
#       pointing back here, prints its output and exits with its status. The
#       nodes' standard error is in $KEEL_NETNS_KEEP/node-N.err when
#       KEEL_NETNS_KEEP names a directory. Every namespace, process and file
#       is removed on exit, even after a failure or a signal.
#       With KEEL_NETNS_CLIENT set (a command, for keel cluster
#       --application-loop), it also runs that command in a namespace of its
#       own (10.77.0.5) as the job's client process, with KEEL_NETNS_JOIN
#       (node 0's address), KEEL_NETNS_SECRET (the secret's file) and
#       KEEL_NETNS_HOST (its own address) in its environment; its output is
#       in $KEEL_NETNS_KEEP/client.log, and its failure fails the run.
#   netns-cluster.sh fault KIND N MS
#       (keel cluster calls this) carries out node fault KIND on node N:
#       partition, split, oneway with nftables in node N's namespace, healed
#       after MS ms by a background timer; kill9, stop, cut with signals.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
subnet=10.77.0
coordinator_ip=$subnet.1
node_ip() { echo "$subnet.$((10 + $1))"; }
client_ip=$subnet.5

available() {
  if [ "$(id -u)" -ne 0 ]; then echo "netns-cluster: needs root (ip netns)"; return 1; fi
  command -v ip >/dev/null || { echo "netns-cluster: no ip command (iproute2)"; return 1; }
  command -v nft >/dev/null || { echo "netns-cluster: no nft command (nftables)"; return 1; }
  local probe="knprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then echo "netns-cluster: ip netns add fails here"; return 1; fi
  local ok=0
  ip netns exec "$probe" nft add table inet keelprobe 2>/dev/null || ok=1
  ip netns del "$probe" 2>/dev/null || true
  [ $ok = 0 ] || echo "netns-cluster: nftables does not work in a namespace here"
  return $ok
}

# ---- fault: called by keel cluster ------------------------------------------

nft_rules() {  # KIND -> the ruleset that carries it out in the node's namespace
  local in="" out=""
  case "$1" in
    partition) in='iifname "eth0" drop'; out='oifname "eth0" drop' ;;
    split) in="ip saddr $coordinator_ip drop"; out="ip daddr $coordinator_ip drop" ;;
    oneway) out='oifname "eth0" drop' ;;
  esac
  echo "table inet keelfault {"
  [ -z "$in" ] || printf '  chain in {\n    type filter hook input priority 0;\n    %s\n  }\n' "$in"
  printf '  chain out {\n    type filter hook output priority 0;\n    %s\n  }\n' "$out"
  echo "}"
}

fault() {
  local kind="$1" node="$2" ms="$3"
  : "${KEEL_NETNS_PREFIX:?netns-cluster fault runs under netns-cluster.sh run}"
  local ns="$KEEL_NETNS_PREFIX-$node" pid
  pid="$(cat "$KEEL_NETNS_DIR/node-$node.pid" 2>/dev/null)" || { echo "no node $node" >&2; return 1; }
  case "$kind" in
    partition|split|oneway)
      nft_rules "$kind" | ip netns exec "$ns" nft -f -
      echo "netns-cluster: $kind of node $node for $ms ms" >&2
      # The heal, on a timer of its own: keel cluster waits only for the cut.
      setsid bash -c "sleep $(awk "BEGIN{print $ms/1000}"); ip netns exec '$ns' nft delete table inet keelfault; \
        echo 'netns-cluster: node $node healed' >&2" </dev/null >/dev/null 2>>"$KEEL_NETNS_DIR/heal.log" &
      ;;
    kill9) kill -KILL "$pid" ;;
    stop) kill -STOP "$pid" ;;
    cut)
      kill -STOP "$pid"
      setsid bash -c "sleep $(awk "BEGIN{print $ms/1000}"); kill -CONT $pid" </dev/null >/dev/null 2>&1 &
      ;;
    *) echo "netns-cluster: unknown fault $kind" >&2; return 1 ;;
  esac
}

# ---- run ----------------------------------------------------------------------

prefix="kn$$"
work=""
pids=()

cleanup() {
  local status=$?
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^$prefix-" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
  if [ -n "$work" ]; then
    if [ -n "${KEEL_NETNS_KEEP:-}" ]; then
      cp "$work"/node-*.err "$work"/heal.log "$work"/client.log "$KEEL_NETNS_KEEP"/ 2>/dev/null || true
    fi
    rm -rf "$work"
  fi
  exit $status
}

# Joins namespace $prefix-NAME to the bridge at address IP.
attach() {
  local name="$1" addr="$2"
  ip netns add "$prefix-$name"
  ip link add "${prefix}a$name" netns "$prefix-$name" type veth peer name "${prefix}b$name" netns "$prefix-sw"
  ip -n "$prefix-$name" link set "${prefix}a$name" name eth0
  ip -n "$prefix-$name" addr add "$addr/24" dev eth0
  ip -n "$prefix-$name" link set eth0 up
  ip -n "$prefix-$name" link set lo up
  ip -n "$prefix-sw" link set "${prefix}b$name" master br0 up
}

# Waits (10 s at most) for node N's first line and prints its port.
node_port() {
  local n="$1"
  for _ in $(seq 100); do
    if grep -q "listening on" "$work/node-$n.out" 2>/dev/null; then
      sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$work/node-$n.out" | head -1
      return 0
    fi
    kill -0 "${pids[$n]}" 2>/dev/null || break
    sleep 0.1
  done
  echo "netns-cluster: node $n did not start:" >&2
  cat "$work/node-$n.err" >&2 || true
  return 1
}

run() {
  local keel="$1" nodes="$2"
  shift 2
  trap cleanup EXIT INT TERM
  work="$(mktemp -d /tmp/keel-netns-XXXXXX)"
  ( umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$work/secret" )
  ip netns add "$prefix-sw"
  ip -n "$prefix-sw" link add br0 type bridge
  ip -n "$prefix-sw" link set br0 up
  attach c "$coordinator_ip"
  # The nodes end when this script does, however it ends (their standard
  # input is a pipe only it writes to).
  mkfifo "$work/hold"
  exec 9<>"$work/hold"
  local connect="" timeout_ms="${KEEL_NETNS_TIMEOUT_MS:-1500}"
  for ((i = 0; i < nodes; i++)); do
    attach "$i" "$(node_ip $i)"
    ip netns exec "$prefix-$i" "$keel" node --listen "$(node_ip $i):7000" --secret-file "$work/secret" \
      --heartbeat-ms 200 --connection-timeout-ms "$timeout_ms" --exit-on-stdin-eof \
      <"$work/hold" >"$work/node-$i.out" 2>"$work/node-$i.err" &
    pids+=($!)
    echo $! > "$work/node-$i.pid"
  done
  for ((i = 0; i < nodes; i++)); do
    node_port "$i" >/dev/null
    connect+="${connect:+,}$(node_ip $i):7000"
  done
  local client=""
  if [ -n "${KEEL_NETNS_CLIENT:-}" ]; then
    attach cl "$client_ip"
    KEEL_NETNS_JOIN="$(node_ip 0):7000" KEEL_NETNS_SECRET="$work/secret" KEEL_NETNS_HOST="$client_ip" \
      ip netns exec "$prefix-cl" bash -c "$KEEL_NETNS_CLIENT" <"$work/hold" >"$work/client.log" 2>&1 &
    client=$!
    pids+=("$client")
  fi
  local status=0
  KEEL_NETNS_PREFIX="$prefix" KEEL_NETNS_DIR="$work" ip netns exec "$prefix-c" "$keel" cluster \
    --connect "$connect" --secret-file "$work/secret" --node-fault-command "bash $here/netns-cluster.sh fault" \
    --node-heartbeat-ms 200 --node-timeout-ms "$timeout_ms" "$@" || status=$?
  if [ -n "$client" ]; then
    local client_status=0
    wait "$client" || client_status=$?
    if [ "$client_status" != 0 ]; then
      echo "netns-cluster: the client exited $client_status:" >&2
      cat "$work/client.log" >&2
      [ "$status" != 0 ] || status=$client_status
    fi
  fi
  return $status
}

case "${1:-}" in
  available) available ;;
  fault) shift; fault "$@" ;;
  run) shift; run "$@" ;;
  *) echo "usage: netns-cluster.sh available | run KEEL NODES [keel cluster flags] | fault KIND N MS" >&2; exit 2 ;;
esac
