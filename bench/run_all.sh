#!/usr/bin/env bash
# Runs every keel benchmark in turn and prints each figure beside its
# ceiling, measured in the same run (bench/README.md explains each table).
# Installs what is missing and builds the Release tree first, and fetches
# MNIST for the training figures.
#   bash bench/run_all.sh           everything (about 5 minutes on 2 cores)
#   bash bench/run_all.sh --quick   fewer repetitions (about 3 minutes)
# Run it on an otherwise idle machine: the ratios compare runs of the same
# process, but other load makes both sides noisy.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
quick=0
case "${1:-}" in
  "") ;;
  --quick) quick=1 ;;
  *) echo "run_all: unknown argument '$1' (expected nothing or --quick)" >&2; exit 2 ;;
esac

bash "$root/scripts/build.sh" >/dev/null
bash "$root/scripts/fetch-mnist.sh" >/dev/null
b="$root/build/bench"
section() { printf '\n######## %s\n' "$1"; }

if [ "$quick" = 1 ]; then
  pushes=16; snap_mb=64; snap_reps=3; crashes=200; restart_mb=32; epochs=6; repeats=1; failover_runs=1; rounds=1
else
  pushes=64; snap_mb=256; snap_reps=5; crashes=1000; restart_mb=100; epochs=6; repeats=3; failover_runs=3; rounds=3
fi

section "P1, P2: push throughput, local and across processes (bench/messages/push_bench)"
"$b/messages/push_bench" "$pushes"
section "P1: pushes and pulls between processes, data plane and CAF middleman (bench/cluster/data_plane_bench)"
"$b/cluster/data_plane_bench" "$((pushes / 2 > 8 ? pushes / 2 : 8))" "$rounds"
section "P2: shard apply (bench/actors/apply_bench)"
"$b/actors/apply_bench" 32 5
section "embedding tables: push, pull and bytes per parameter (bench/tables/table_bench)"
"$b/tables/table_bench" 300 "$((quick ? 1 : 3))"
section "embedding tables: a table put into a shard snapshot (bench/tables/table_snapshot_bench)"
"$b/tables/table_snapshot_bench" 1000000 "$((quick ? 3 : 5))"
section "P3: snapshot write and validated read (bench/storage/snapshot_bench)"
"$b/storage/snapshot_bench" "$snap_mb" "$snap_reps"
section "P3: shard recovery from its snapshot (bench/actors/recovery_bench)"
"$b/actors/recovery_bench"
section "issue 20: a shard's restore from its peer's memory vs from the directory (bench/actors/peer_restore_bench)"
"$b/actors/peer_restore_bench"
section "P3: supervised restart from an in-memory snapshot (bench/supervision/restart_bench)"
"$b/supervision/restart_bench" "$crashes" "$restart_mb"
section "P4, P5, scaling: training (bench/training/training_bench)"
"$b/training/training_bench" mnist-mlp "$epochs" "$repeats"
section "issue 23: an application's own loop through ps_client beside keel's workers (bench/training/client_bench)"
"$b/training/client_bench" mnist-mlp 1 "$repeats"
section "issue 23: a Python numpy loop through keel.Client (bench/training/python_client_bench.py)"
PYTHONPATH="$root/build/python" /usr/bin/python3 "$root/bench/training/python_client_bench.py" 1 "$repeats" \
  --cluster "$root/build/demos/keel"
section "issue 23: client loops in a process of their own beside keel's workers on keel cluster (bench/cluster/client_cluster_bench)"
"$b/cluster/client_cluster_bench" mnist-mlp 1 "$repeats"
section "the plain CTR trainer, issue 26's reference (bench/training/ctr_plain_bench)"
"$b/training/ctr_plain_bench"
section "keel's CTR training beside the plain trainer, issue 26 (bench/training/ctr_training_bench)"
"$b/training/ctr_training_bench" all "$((quick ? 1 : 2))"
section "a CTR model's end-of-run evaluation scored by the coordinator and by the workers (bench/training/ctr_eval_bench)"
"$b/training/ctr_eval_bench" ctr-fm "$((quick ? 1 : 3))"
section "issue 20: incremental checkpoints, bytes, cost and restore (bench/training/incremental_checkpoint_bench)"
# About 8 minutes (--quick: about 3, smaller runs); a few GB of disk in /tmp.
if [ "$quick" = 1 ]; then
  "$b/training/incremental_checkpoint_bench" all 1 600000 200000
else
  "$b/training/incremental_checkpoint_bench" all 2
fi
section "node failover of keel cluster (bench/cluster/node_failover.sh)"
bash "$root/bench/cluster/node_failover.sh" "$root/build/demos/keel" "$failover_runs"
section "MNIST across node processes: data plane vs CAF middleman (bench/cluster/cluster_training.sh)"
bash "$root/bench/cluster/cluster_training.sh" "$root/build/demos/keel" 1 "$repeats"
section "a CTR model of 10^8 parameters on 4 node processes, one killed (bench/cluster/ctr_cluster.sh)"
# About 2.5 minutes and 2 GB a process; --quick: a model of about 3 * 10^7
# parameters instead (well under a minute).
bash "$root/bench/cluster/ctr_cluster.sh" "$root/build/demos/keel" "$((quick ? 100000 : 450000))" 1
section "membership changes while training: moves' pauses, placement after a node's death (bench/cluster/membership.sh)"
bash "$root/bench/cluster/membership.sh" "$root/build/demos/keel" "$((quick ? 100000 : 200000))" 1
