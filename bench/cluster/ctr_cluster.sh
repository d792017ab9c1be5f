#!/usr/bin/env bash
# A CTR model bigger than one process was meant to hold (issue 26, item 4):
# ctr-fm (rows of d = 17 floats, AdaGrad: as many accumulator floats) trained
# with `keel cluster --nodes 4` (4 shards, 4 workers, batch 256) on the first
# TRAIN_EXAMPLES rows of the click log, three ways in each repetition:
#  - killed:  node:1 (a shard and a worker) killed with kill -9 mid-run,
#             checkpoints every EVERY steps (16 in the run, the last one at
#             the last step): a worker's replay log holds the pushes since
#             the checkpoint before the last, so the interval sets what a
#             node holds beside its shard; each checkpoint is streamed into
#             its file (a delta of the rows pushed since the one before,
#             a full base every 8), never built in memory;
#  - clean:   the same without the fault (its params_sha256 must equal the
#             killed run's: BSP bit-identity through the kill);
#  - nockpt:  the same without checkpoints (--checkpoint-every 0): what the
#             coordinator holds when no snapshot passes through it, and what
#             a node holds beside its shard's rows. Its replay logs are
#             bounded (--replay-log-mb 8: 8 MiB a worker): without a
#             checkpoint nothing else empties them, and unbounded they held
#             every push of the run (166 MB a worker at 450,000 rows, more
#             than the node's shard); past the bound a restarted shard costs
#             a rollback to step 0, which a node kill costs anyway here (the
#             node's worker loses its own log).
# The model's size is what the shards reported at the end of the killed
# run (keel's "embedding tables" line: rows, and bytes of values and
# optimizer state counted where the rows live; parameters are those bytes
# over 4, float32). Peak RSS
# is keel's own figure (keel cluster prints getrusage for itself and wait4's
# for every node process it reaped, the killed one included: the kernel's
# counts, exact). Rows pushed come from the run's batch schedule
# (bench/cluster/ctr_rows_pushed: the distinct keys of each worker's batch,
# per table, summed; replays not counted), divided by the run's own time.
# The reference, independent of the model's size: the plain single-process
# trainer (build/bench/training/ctr_plain_bench) on PLAIN_EXAMPLES rows, a
# model small enough for one process; its rows/s is its examples/s times the
# rows per example of its own schedule (one worker, batch 256).
# The nodes run with a heartbeat of 1 s and a connection timeout of 30 s,
# not the defaults (200 / 800 ms): at those, healthy nodes were declared
# lost (and back) again and again, each time a restart and a rollback, and
# a run on 500,000 rows (128 M parameters) had not finished after 2.5
# minutes on this loaded 2-core machine; presumably a node busy moving a
# shard's snapshot of this size through CAF's middleman (a checkpoint, or a
# restarted shard's spawn request) misses heartbeats. kill -9 closes the
# node's sockets, so its loss is still seen soon (38-60 ms here).
#   bench/cluster/ctr_cluster.sh [KEEL_BINARY] [TRAIN_EXAMPLES=450000] [RUNS=1] [PLAIN_EXAMPLES=200000]
# With CTR_CLUSTER_LOGS=DIR the runs' logs are kept there (run-N.killed.log, ...).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
keel="${1:-$root/build/demos/keel}"
examples="${2:-450000}"
runs="${3:-1}"
plain_examples="${4:-200000}"
bench="$(dirname "$keel")/../bench"
pushed="$bench/cluster/ctr_rows_pushed"
plain="$bench/training/ctr_plain_bench"
for b in "$keel" "$pushed" "$plain"; do
  [ -x "$b" ] || { echo "ctr_cluster: no $b (build first: bash scripts/build.sh)" >&2; exit 1; }
done

workers=4
batch=256
log_mb=8
spe=$((examples / workers / batch))
every=$((spe / 16))
[ "$every" -ge 2 ] || { echo "ctr_cluster: TRAIN_EXAMPLES $examples is too few for 16 checkpoints of 4 x 256" >&2; exit 2; }
steps=$((every * 16))
kill_at=$((steps * 5 / 8))
common=(--model ctr-fm --optimizer adagrad --shards 4 --workers "$workers" --batch "$batch"
        --train-limit "$examples" --test-limit 10000 --steps "$steps")
tmp="$(mktemp -d /tmp/ctr_cluster.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT

fail() {
  echo "ctr_cluster: $1" >&2
  [ -n "${2:-}" ] && tail -40 "$2" >&2
  exit 1
}
field() { sed -n "s|.*$1.*|\\1|p" "$2" | head -1; }
mb() { awk -v k="$1" 'BEGIN { printf "%.0f", k * 1024 / 1e6 }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }

# Runs keel cluster as $1 with the extra flags after it; the log in $tmp/$1.log.
run_cluster() {
  local label="$1"
  shift
  "$keel" cluster --nodes 4 --node-heartbeat-ms 1000 --node-timeout-ms 30000 "${common[@]}" "$@" >"$tmp/$label.log" 2>&1 || fail "$label run failed:" "$tmp/$label.log"
  local log="$tmp/$label.log"
  local acked applied
  acked="$(field 'pushes acked \([0-9]*\),.*' "$log")"
  applied="$(field 'pushes acked [0-9]*, applied \([0-9]*\),.*' "$log")"
  [ -n "$acked" ] && [ "$acked" = "$applied" ] || fail "$label run: pushes acked $acked, applied $applied" "$log"
}

rate() { field 'done in [0-9.]* s, \([0-9.e+]*\) samples/s.*' "$1"; }
secs() { field 'done in \([0-9.e+]*\) s,.*' "$1"; }
sha() { field 'params_sha256 \([0-9a-f]*\).*' "$1"; }
# "kB label" lines of a log's peak RSS report.
peaks() { sed -n 's/^keel cluster: peak RSS \([0-9]*\) kB: \(.*\)$/\1 \2/p' "$1"; }

rows_pushed="$("$pushed" ctr-fm "$examples" "$workers" "$batch" "$steps" | sed -n 's/^rows_pushed \([0-9]*\) .*/\1/p')"
plain_steps=$((plain_examples / batch))
plain_rows_per_example="$("$pushed" ctr-fm "$plain_examples" 1 "$batch" "$plain_steps" | sed -n 's/.*rows_per_example \([0-9.]*\).*/\1/p')"

for ((i = 1; i <= runs; i++)); do
  rm -rf "$tmp/killed-ckpt" "$tmp/clean-ckpt"  # each run starts from an empty checkpoint directory
  run_cluster killed --checkpoint-every "$every" --checkpoint-dir "$tmp/killed-ckpt" --faults "kill9:node:1@$kill_at"
  run_cluster clean --checkpoint-every "$every" --checkpoint-dir "$tmp/clean-ckpt" --quiet
  run_cluster nockpt --checkpoint-every 0 --replay-log-mb "$log_mb" --quiet
  [ "$(sha "$tmp/killed.log")" = "$(sha "$tmp/clean.log")" ] ||
    fail "the killed run ended with params_sha256 $(sha "$tmp/killed.log"), the fault-free one $(sha "$tmp/clean.log")" "$tmp/killed.log"
  [ "$(sha "$tmp/clean.log")" = "$(sha "$tmp/nockpt.log")" ] ||
    fail "the run without checkpoints ended with another params_sha256 than the one with" "$tmp/nockpt.log"
  tables="$(grep '^keel train: [0-9]* embedding tables, ' "$tmp/killed.log" || true)"
  [ -n "$tables" ] || fail "the killed run printed no embedding tables line" "$tmp/killed.log"
  model_rows="$(sed -n 's/.* embedding tables, \([0-9]*\) rows, .*/\1/p' <<<"$tables")"
  model_mb="$(sed -n 's/.* rows, \([0-9.]*\) MB of values and optimizer state .*/\1/p' <<<"$tables")"
  held_mb="$(sed -n 's/.* optimizer state held in \([0-9.]*\) MB .*/\1/p' <<<"$tables")"
  model_bytes="$(awk -v m="$model_mb" 'BEGIN { printf "%.0f", m * 1e6 }')"
  params="$(awk -v b="$model_bytes" 'BEGIN { printf "%.1f", b / 4 / 1e6 }')"
  "$plain" ctr-fm "$plain_examples" >"$tmp/plain.txt" 2>/dev/null || fail "ctr_plain_bench failed" "$tmp/plain.txt"
  plain_rate="$(awk '$1 == "ctr-fm" { print $8 }' "$tmp/plain.txt")"

  if [ -n "${CTR_CLUSTER_LOGS:-}" ]; then
    mkdir -p "$CTR_CLUSTER_LOGS"
    for f in killed clean nockpt; do cp "$tmp/$f.log" "$CTR_CLUSTER_LOGS/run-$i.$f.log"; done
  fi
  echo "== run $i of $runs: ctr-fm (d = 17) with AdaGrad, keel cluster --nodes 4, 4 shards, 4 workers, batch 256,"
  echo "   $examples training rows, $steps steps, checkpoints every $every steps (none in the nockpt run, whose"
  echo "   replay logs are bounded at $log_mb MiB a worker: $(field 'replay logs held at most \([0-9.]* MB\).*' "$tmp/nockpt.log") at most)"
  echo "model, as the shards reported it at the end of the killed run: $model_rows rows over 26 tables, $model_mb MB of"
  echo "   values and AdaGrad state (float32): $params M parameters, held by the shards' tables in $held_mb MB"
  printf '%-58s %12s %9s %7s  %s\n' "process (run)" "peak RSS MB" "model MB" ratio goal
  for run in killed clean nockpt; do
    while read -r kb who; do
      goal="each node well under 0.5"
      case "$who" in the\ coordinator*) goal="a small fraction" ;; esac
      printf '%-58s %12s %9s %7s  %s\n' "${who%% (pid*} ($run)" "$(mb "$kb")" "$model_mb" "$(ratio "$((kb * 1024))" "$model_bytes")" "$goal"
    done < <(peaks "$tmp/$run.log")
  done
  printf '\n%-58s %11s %13s %11s %7s\n' measurement examples/s "rows pushed/s" "reference" ratio
  for run in clean killed nockpt; do
    r="$(rate "$tmp/$run.log")"
    rps="$(awk -v n="$rows_pushed" -v s="$(secs "$tmp/$run.log")" 'BEGIN { printf "%.0f", n / s }')"
    printf '%-58s %11.0f %13s %11.0f %7s\n' "keel cluster, 4 node processes ($run)" "$r" "$rps" "$plain_rate" "$(ratio "$r" "$plain_rate")"
  done
  printf '%-58s %11.0f %13.0f %11s %7s\n' "plain trainer, one thread, $plain_examples rows (the reference)" "$plain_rate" \
    "$(awk -v r="$plain_rate" -v x="$plain_rows_per_example" 'BEGIN { print r * x }')" - -
  grep -F "node:1 kill9:node:1@$kill_at:" "$tmp/killed.log" | grep -qF 'serving again' ||
    fail "no recovery line for the kill" "$tmp/killed.log"
  echo
  echo "kill -9 of node:1 (planned at step $kill_at of $steps; keel's recovery timeline, a rollback included if the"
  echo "killed node's worker lost pushes a restored shard needed):"
  sed -n '/^keel train: recoveries:/,/^keel cluster:/p' "$tmp/killed.log" | grep '^  '
  echo "  pushes acked $(field 'pushes acked \([0-9]*\),.*' "$tmp/killed.log") == applied; params_sha256 equal to the fault-free run's: yes"
  echo "  $(grep -F 'checkpoints committed' "$tmp/killed.log")"
  echo
done
