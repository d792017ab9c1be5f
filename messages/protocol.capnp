# keel's wire protocol: every message that actors exchange, locally or across
# processes. Each top-level message starts with `version` (a receiver rejects
# a version it does not know, see messages/validate.hpp). Evolve by adding
# fields with new ordinals only; never renumber, retype or remove a field.
#
# Parameter keys: a shard owns a range of a global key space (UInt64). Dense
# values travel as little-endian Float32 packed into `Data` (one memcpy in and
# out); sparse values as parallel key/value lists.
@0xd805e45c8cf36c9e;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("keel::schema");

const protocolVersion :UInt16 = 1;

# Keys [begin, end) with their values: (end - begin) * 4 bytes of Float32.
struct DenseRange {
  begin @0 :UInt64;
  end @1 :UInt64;
  values @2 :Data;
}

# A half-open key range without values, used to ask for parameters.
struct KeyRange {
  begin @0 :UInt64;
  end @1 :UInt64;
}

# Sparse keys (strictly increasing) and one value per key.
struct SparseBlock {
  keys @0 :List(UInt64);
  values @1 :List(Float32);
}

# Rows of one embedding table (the job's layout table `table`, rows of `dim`
# float32): `keys` holds n little-endian UInt64 keys (8n bytes) and `rows`
# n x dim little-endian Float32 (4 n dim bytes), row i that of key i. In a
# push the keys are strictly increasing (each row applied once) and the rows
# are gradients; in a pull reply they are the rows of the keys asked, in the
# order asked.
struct TableBlock {
  table @0 :UInt32;
  dim @1 :UInt32;
  keys @2 :Data;
  rows @3 :Data;
}

# The keys of one table a pull asks for (8n bytes of little-endian UInt64,
# any order, repeats allowed).
struct TableKeys {
  table @0 :UInt32;
  keys @1 :Data;
}

# A worker's gradient for one shard at one step. `seq` counts the worker's
# pushes from 1; a shard applies each (worker, seq) at most once.
struct Push {
  version @0 :UInt16;
  worker @1 :UInt32;
  seq @2 :UInt64;
  step @3 :UInt64;
  shard @4 :UInt32;
  dense @5 :List(DenseRange);
  sparse @6 :SparseBlock;
  tables @7 :List(TableBlock);  # at most one block a table, table indices increasing
  # The shard incarnation this push is addressed to (its fencing epoch, from
  # the job, greater for every new incarnation); 0: none named. A shard with
  # an epoch refuses a push that names another one.
  shardEpoch @8 :UInt64;
}

struct PushAck {
  version @0 :UInt16;
  worker @1 :UInt32;
  seq @2 :UInt64;
  shard @3 :UInt32;
  shardVersion @4 :UInt64;   # the shard's version after this push
  status @5 :Status;
  reason @6 :Text;           # set when status is rejected or outOfOrder
  expectedSeq @7 :UInt64;    # with outOfOrder: the seq the shard needs next
  shardEpoch @8 :UInt64;     # the epoch of the incarnation that acknowledged

  enum Status {
    applied @0;
    duplicate @1;            # already applied (or held) earlier: acknowledged again
    rejected @2;             # invalid for this shard; resending will not help
    accepted @3;             # held for its BSP step; applied once the step is complete
    outOfOrder @4;           # seq skips ahead: resend from expectedSeq
  }
}

# Ask a shard for its values at a clock (the worker's step). The shard answers
# when its consistency rule (BSP, SSP, ASP) allows.
struct PullRequest {
  version @0 :UInt16;
  worker @1 :UInt32;
  shard @2 :UInt32;
  clock @3 :UInt64;
  dense @4 :List(KeyRange);
  sparseKeys @5 :List(UInt64);
  tables @6 :List(TableKeys);   # at most one entry a table, table indices increasing
  shardEpoch @7 :UInt64;     # as in Push
}

struct PullReply {
  version @0 :UInt16;
  shard @1 :UInt32;
  clock @2 :UInt64;
  shardVersion @3 :UInt64;
  dense @4 :List(DenseRange);
  sparse @5 :SparseBlock;
  tables @6 :List(TableBlock);  # one per entry of the request's tables, in its order
  shardEpoch @7 :UInt64;     # as in PushAck
}

# The checkpointer asks a shard for its state as of now.
struct SnapshotRequest {
  version @0 :UInt16;
  checkpoint @1 :UInt64;
  shard @2 :UInt32;
}

enum DType {
  float32 @0;
  float64 @1;
  int32 @2;
  int64 @3;
  uint8 @4;
}

# A named tensor. Its bytes are the concatenation of `chunks` (each chunk at
# most a few MiB, so no single capnp list limit applies); `crc32c` covers
# those bytes.
struct Tensor {
  name @0 :Text;
  dtype @1 :DType;
  shape @2 :List(UInt64);
  chunks @3 :List(Data);
  crc32c @4 :UInt32;
}

struct AppliedSeq {
  worker @0 :UInt32;
  seq @1 :UInt64;
}

# Opaque application bytes stored with a snapshot (worker state, optimizer
# configuration, ...), named so a reader can find its own.
struct Section {
  name @0 :Text;
  data @1 :Data;
  crc32c @2 :UInt32;
}

# A shard's state: what a restarted shard needs to continue exactly where the
# snapshot was taken. `applied` holds, for every worker, the highest seq this
# state includes.
struct ShardSnapshot {
  version @0 :UInt16;
  magic @1 :UInt64;          # snapshotMagic
  formatVersion @2 :UInt16;
  shard @3 :UInt32;
  checkpoint @4 :UInt64;
  step @5 :UInt64;
  shardVersion @6 :UInt64;
  applied @7 :List(AppliedSeq);
  createdUnixMs @8 :Int64;
  tensors @9 :List(Tensor);
  sections @10 :List(Section);
  # The run that took it (storage/run_identity.hpp): its id and the hash of
  # the configuration that decides its result. Empty in snapshots of a keel
  # from before run identities.
  runId @11 :Text;
  configHash @12 :Text;
  # An incremental snapshot (a delta) holds only what changed since its
  # parent, the shard's previous snapshot file in the same chain (file name
  # and checkpoint below); a base (parentFile empty) holds everything. A
  # chain is a base and the deltas after it, in order: restoring it applies
  # each in turn (actors/core/shard_snapshot.hpp says what a delta holds).
  parentFile @13 :Text;
  parentCheckpoint @14 :UInt64;
  baseCheckpoint @15 :UInt64;  # the chain's base (a base: its own checkpoint)
}

const snapshotMagic :UInt64 = 0x4b45454c534e4150;  # "KEELSNAP"

struct ManifestEntry {
  shard @0 :UInt32;
  file @1 :Text;             # a file name inside the checkpoint directory
  bytes @2 :UInt64;
  crc32c @3 :UInt32;
  # What writing the file took its writer (the shard's node): wall time and
  # CPU time of the writing thread. 0 in files of a keel from before.
  writeMicros @4 :UInt64;
  writeCpuMicros @5 :UInt64;
  # When `file` is a delta: the files it applies on, base first, each
  # committed before by a checkpoint of its own (empty: `file` is a base).
  chain @6 :List(ChainLink);
}

# One file of a shard's chain as the manifest records it: the same checks
# as its own entry (size, payload CRC, checkpoint, run) apply when it is read.
struct ChainLink {
  checkpoint @0 :UInt64;
  file @1 :Text;
  bytes @2 :UInt64;
  crc32c @3 :UInt32;
}

# Written last and atomically: a checkpoint without its manifest does not exist.
# A shard that has written its own snapshot file reports it to the
# checkpointer as a manifest of one entry (its part of the checkpoint).
struct CheckpointManifest {
  version @0 :UInt16;
  checkpoint @1 :UInt64;
  step @2 :UInt64;
  createdUnixMs @3 :Int64;
  shards @4 :List(ManifestEntry);
  # The run that committed it: its id, the hash of its configuration, and
  # that configuration as "field=value" lines (to name a field that differs).
  # Empty in manifests of a keel from before run identities.
  runId @5 :Text;
  configHash @6 :Text;
  config @7 :Text;
}

# A stable name now refers to a new incarnation, is restarting, or is gone.
struct DirectoryUpdate {
  version @0 :UInt16;
  name @1 :Text;
  incarnation @2 :UInt64;
  state @3 :State;
  node @4 :Text;

  enum State {
    up @0;
    restarting @1;
    gone @2;
  }
}

struct Heartbeat {
  version @0 :UInt16;
  node @1 :Text;
  seq @2 :UInt64;
  sentUnixMs @3 :Int64;
}

struct NodeJoin {
  version @0 :UInt16;
  node @1 :Text;
  host @2 :Text;
  port @3 :UInt16;
  pid @4 :UInt32;
  actorTypes @5 :List(Text);
  # The cluster-secret handshake (actors/cluster/node_agent.hpp): `challenge` is 32
  # random bytes the receiver must prove the secret over; `proof` is
  # HMAC-SHA256 over the other side's challenge (32 bytes), or empty.
  challenge @6 :Data;
  proof @7 :Data;
  role @8 :Role;             # a client (a coordinator) listens nowhere: port 0
  dataPort @9 :UInt16;       # the node's data plane (actors/data_plane/data_plane.hpp); 0: none

  enum Role {
    node @0;
    client @1;
  }
}

