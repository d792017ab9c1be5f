#pragma once
// The atoms of keel's actor protocol that carry no capnp payload: control
// messages between keel's own actors, in one process or, through CAF's
// middleman, between a coordinator and its node processes (a remote
// worker's step reports, status requests to a remote shard). Everything
// that carries data travels as a msg<S> (messages/protocol.hpp).

#include <caf/atom.hpp>

namespace keel {

using status_atom = caf::atom_constant<caf::atom("status")>;      // ask a shard what it has of a worker
using params_atom = caf::atom_constant<caf::atom("params")>;      // read a shard's state as a snapshot
using truncate_atom = caf::atom_constant<caf::atom("truncate")>;  // a checkpoint covers logged pushes
using retry_atom = caf::atom_constant<caf::atom("retry")>;
using resend_atom = caf::atom_constant<caf::atom("resend")>;      // (shard, push, attempt): send a logged push again
using done_atom = caf::atom_constant<caf::atom("done")>;          // a worker finished its steps
using replay_atom = caf::atom_constant<caf::atom("replay")>;      // resend the log to a restarted shard
using crash_atom = caf::atom_constant<caf::atom("crash")>;        // fault injection: throw now
using window_atom = caf::atom_constant<caf::atom("window")>;      // steps a worker may start
using rollback_atom = caf::atom_constant<caf::atom("rollback")>;  // a worker cannot recover alone
using link_release_atom = caf::atom_constant<caf::atom("linkfree")>;  // a held message's time is up
using refresh_atom = caf::atom_constant<caf::atom("refresh")>;    // look the shards up again
using expire_atom = caf::atom_constant<caf::atom("expire")>;      // an incomplete checkpoint times out
using fire_atom = caf::atom_constant<caf::atom("fire")>;          // a fault's trigger has come
using deadline_atom = caf::atom_constant<caf::atom("deadline")>;  // a request timed by request_deadlines is due
using fence_atom = caf::atom_constant<caf::atom("fence")>;        // (epoch): a newer incarnation of this shard is up
using score_atom = caf::atom_constant<caf::atom("score")>;        // (slice_task): a worker scores a held-out slice
using write_atom = caf::atom_constant<caf::atom("write")>;        // (snapshot, tag): a shard's writer writes it
using move_atom = caf::atom_constant<caf::atom("move")>;          // (child, why): the job stops a child to run it elsewhere
using client_wake_atom = caf::atom_constant<caf::atom("clientwake")>;  // an application's loop asked its worker something
// (items) -> uint64_t: a job's workers changed while it runs (job::change_workers, keel admin join/leave)
using workers_atom = caf::atom_constant<caf::atom("job_wrkrs")>;
// (worker index) -> uint64_t: no node could run that worker for
// --node-wait-ms; it may leave the job instead (training_config::min_workers)
using worker_lost_atom = caf::atom_constant<caf::atom("job_wlost")>;
// (worker_schedule): the job changed its workers at runtime (worker_schedule::changed)
using workers_changed_atom = caf::atom_constant<caf::atom("wchanged")>;
using seal_atom = caf::atom_constant<caf::atom("seal")>;          // (streamed file): a shard's writer makes it durable
// (checkpoint, shard, step, reason): a shard could not write its snapshot
// of that checkpoint (it writes it again after a backoff).
using write_failed_atom = caf::atom_constant<caf::atom("writefail")>;

}  // namespace keel
