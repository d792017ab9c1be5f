#!/usr/bin/env bash
# Membership changes while a cluster trains (issue 21): what a move costs
# the training, beside the state it moves.
# ctr-lr with AdaGrad on `keel cluster --nodes 3` (4 shards, 4 workers,
# batch 256, a checkpoint every EVERY steps), in each repetition:
#  - moved: node:3 joins at 1/4 of the run (a shard and a worker move to
#           it), node:0 is drained at 1/2 and node:1 at 3/4 (their shards
#           and workers move away): 3 nodes, then 4, then 3, then 2;
#  - killed: node:1 killed with kill -9 at 1/2 (its children restart on the
#           survivors by load);
#  - stopped: the same moves with --no-pre-copy (each moved shard is
#           stopped, then restored from the directory on its new node);
#  - clean: none of these; its params_sha256 must equal all others' (BSP).
# For every shard a move restarted: its checkpoint's bytes (what the
# placement weighs it by), how long its pre-copy took (the new node
# restoring its newest checkpoint while it served), the time from its stop
# to its new incarnation's start (the pause the shard's workers see before
# they can replay), and to the last replay the workers resent to it (the
# cutover, as the timeline records it). The reference is the clean run's
# mean step time: a pause of N steps is what the workers, all waiting on
# the moved shard under BSP, lose. After the kill: the time from the
# node's loss to the last of its children placed.
#   bench/cluster/membership.sh [KEEL_BINARY] [TRAIN_EXAMPLES=200000] [RUNS=1]
# With MEMBERSHIP_LOGS=DIR the runs' logs are kept there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
keel="${1:-$root/build/demos/keel}"
examples="${2:-200000}"
runs="${3:-1}"
[ -x "$keel" ] || { echo "membership: no $keel (build first: bash scripts/build.sh)" >&2; exit 1; }
workers=4
batch=256
steps=$((examples / workers / batch))
every=$((steps / 16))
[ "$every" -ge 2 ] || { echo "membership: TRAIN_EXAMPLES $examples is too few" >&2; exit 2; }
common=(--nodes 3 --model ctr-lr --optimizer adagrad --shards 4 --workers "$workers" --batch "$batch"
        --train-limit "$examples" --test-limit 10000 --steps "$steps" --checkpoint-every "$every")
tmp="$(mktemp -d /tmp/membership.XXXXXX)"
trap 'rm -rf "$tmp"' EXIT
fail() {
  echo "membership: $1" >&2
  [ -n "${2:-}" ] && tail -40 "$2" >&2
  exit 1
}
sha() { sed -n 's/.*params_sha256 \([0-9a-f]*\).*/\1/p' "$1" | head -1; }
secs() { sed -n 's/.*done in \([0-9.e+]*\) s,.*/\1/p' "$1" | head -1; }

for ((i = 1; i <= runs; i++)); do
  plan="join:node:3@$((steps / 4)),drain:node:0@$((steps / 2)),drain:node:1@$((steps * 3 / 4))"
  "$keel" cluster "${common[@]}" --faults "$plan" >"$tmp/moved.log" 2>&1 || fail "the moved run failed" "$tmp/moved.log"
  "$keel" cluster "${common[@]}" --no-pre-copy --faults "$plan" >"$tmp/stopped.log" 2>&1 ||
    fail "the run without pre-copies failed" "$tmp/stopped.log"
  "$keel" cluster "${common[@]}" --faults "kill9:node:1@$((steps / 2))" >"$tmp/killed.log" 2>&1 ||
    fail "the killed run failed" "$tmp/killed.log"
  "$keel" cluster "${common[@]}" --quiet >"$tmp/clean.log" 2>&1 || fail "the clean run failed" "$tmp/clean.log"
  for run in moved stopped killed; do
    [ "$(sha "$tmp/$run.log")" = "$(sha "$tmp/clean.log")" ] ||
      fail "the $run run ended with params_sha256 $(sha "$tmp/$run.log"), the clean one $(sha "$tmp/clean.log")" "$tmp/$run.log"
  done
  step_ms="$(awk -v s="$(secs "$tmp/clean.log")" -v n="$steps" 'BEGIN { printf "%.2f", s * 1000 / n }')"
  echo "== run $i of $runs: ctr-lr, keel cluster --nodes 3 -> 4 -> 3 -> 2 ($plan), $steps steps,"
  echo "   a checkpoint every $every steps; params_sha256 equal to the clean run's: yes; clean mean step $step_ms ms"
  # Timeline lines: "  [T ms] KIND ACTOR: detail". Per moved shard: its
  # pre-copy (membership node:N: pre-copied shard:S ... in T ms), its stop
  # (down ...: moved), its restart, its last replay, its bytes.
  for run in moved stopped; do
    awk -v step_ms="$step_ms" -v run="$run" '
      function ms(line) { sub(/^ *\[/, "", line); sub(/ ms\].*/, "", line); return line + 0 }
      function shard_of(field) { sub(/:$/, "", field); return field }
      / ms\] membership node:[0-9]*: pre-copied shard:/ {
        s = $6; t = $0; sub(/ ms while it served.*/, "", t); sub(/.* restored in /, "", t); copied[s] = t }
      / ms\] down shard:[0-9]*: .*moved: / {
        s = shard_of($4); cur[s] = ++n; who[n] = s; stop[n] = ms($0); pre[n] = (s in copied) ? copied[s] " ms" : "none"; delete copied[s] }
      / ms\] placed shard:[0-9]*: .*; it weighs / {
        s = shard_of($4); if (s in cur) { w = $0; sub(/.*; it weighs /, "", w); sub(/;.*/, "", w); weighs[cur[s]] = w } }
      / ms\] restart shard:[0-9]*:/ { s = shard_of($4); if ((s in cur) && !(cur[s] in back)) back[cur[s]] = ms($0) }
      / ms\] replay worker:[0-9]*: resending [0-9]* pushes to shard:/ { s = $NF; if ((s in cur) && (cur[s] in back)) done_at[cur[s]] = ms($0) }
      END {
        for (k = 1; k <= n; ++k) {
          pause = back[k] - stop[k]; cut = (done_at[k] ? done_at[k] : back[k]) - stop[k]
          printf "%-7s moved %-8s %9s: pre-copy %8s; stop to restart %6.1f ms, to its last replay %6.1f ms (%.1f clean steps)\n", run, who[k], weighs[k], pre[k], pause, cut, cut / step_ms
        }
      }' "$tmp/$run.log"
  done
  awk '
    function ms(line) { sub(/^ *\[/, "", line); sub(/ ms\].*/, "", line); return line + 0 }
    / ms\] node_down node:1: lost/ { lost = ms($0) }
    / ms\] placed / { if (lost) last = ms($0) }
    END { if (lost) printf "kill -9 of node:1: its children placed on the survivors %.1f ms after its loss was seen\n", last - lost }' "$tmp/killed.log"
  grep "where the children ran last" "$tmp/moved.log" || true
  if [ -n "${MEMBERSHIP_LOGS:-}" ]; then
    mkdir -p "$MEMBERSHIP_LOGS"
    for f in moved stopped killed clean; do cp "$tmp/$f.log" "$MEMBERSHIP_LOGS/run-$i.$f.log"; done
  fi
done
