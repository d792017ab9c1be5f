// keel train's flags, declared (train_flags.hpp).
#include "train_flags.hpp"

namespace keel::cli {

void add_train_flags(po::options_description& d, train_flags& f) {
  auto& c = f.cfg;
  d.add_options()("help", "show this help")
    ("model", text_flag(&f.choices.model, "NAME"), "mnist-mlp | mnist-softmax | sparse-lr | probe | ctr-lr | ctr-fm")
    ("shards", number_flag(&c.training.shards, "N", config_bounds::shards), "parameter shards")
    ("workers", text_flag(&f.workers, "N|MIN:MAX"),
     "workers; MIN:MAX (keel cluster): the job starts MAX and goes on with fewer, down to MIN, when no node "
     "can run a worker (keel cluster --worker-slots, --node-wait-ms) instead of failing")
    ("worker-changes", text_flag(&f.worker_changes, "PLAN", false),
     "elastic workers: join:worker:W@STEP (worker W takes part from STEP on), leave:worker:W@STEP "
     "(its last step is STEP-1) and reserve:worker:W (W takes part only once an application lets it "
     "join, job::change_workers), comma-separated; each step's batches are dealt among its workers")
    ("consistency", text_flag(&f.choices.consistency, "RULE"), "bsp | ssp:S | asp")
    ("optimizer", text_flag(&f.choices.optimizer, "NAME"), "sgd | momentum | adagrad | adam (ctr-lr, ctr-fm: adagrad)")
    ("rules", text_flag(&f.choices.rules, "NAME=OPT[:LR],..."),
     "update rules of their own for named dense tensors and embedding tables, e.g. fc1.weight=adam:0.001 "
     "(the rest: --optimizer)")
    ("lr", number_flag(&f.lr, "X", config_bounds::lr, false), "learning rate (default: the model's own)")
    ("batch", number_flag(&c.training.batch_size, "N", config_bounds::batch_size),
     "examples per worker step (ctr-lr, ctr-fm: 128, so that 2 workers make the plain trainer's 256)")
    ("combine", text_flag(&f.combine, "HOW"),
     "how a step's workers' gradients combine: sum (each worker's batch mean, added) | mean (the gradient "
     "of all the step's examples as one batch, as a single trainer of batch workers x batch computes it; "
     "ctr-lr, ctr-fm: mean)")
    ("epochs", number_flag<uint64_t>(&f.epochs, "N", 1, 1000000, false),
     "passes over the training set (default: 5 for mnist-mlp, 1 for the others)")
    ("steps", number_flag(&f.steps, "N", config_bounds::steps, false),
     "global steps per worker (default: --epochs worth)")
    ("seed", number_flag(&c.training.seed, "N"), "seed of data order and initial values")
    ("table-capacity", number_flag(&c.training.tables.capacity_rows, "ROWS", config_bounds::table_capacity_rows),
     "rows each shard keeps of each embedding table (ctr-lr, ctr-fm); past it a row is evicted, as "
     "--table-eviction says (0: no bound)")
    ("table-eviction", text_flag(&f.choices.eviction, "POLICY"), "which row a full table evicts: lru (the least "
     "recently updated) | lfu (the least frequently updated: fewest pushes, then least recently)")
    ("admit-after", number_flag<uint32_t>(&c.training.tables.admit_after, "N", 0, max_admit_after),
     "a key becomes an embedding row at its N-th push; its earlier pushes are dropped (0 or 1: at its first)")
    ("checkpoint-dir", text_flag(&f.checkpoint_dir, "DIR", false), "where checkpoints go (default: a new temp dir, removed when the run succeeds)")
    ("resume", text_flag(&f.resume_dir, "DIR", false), "continue the run whose checkpoints are in this directory "
                                       "(its process died), with the flags it was started with")
    ("checkpoint-every", number_flag(&c.checkpoints.every, "N"), "steps between checkpoints (0: none; the workers then keep their pushes in memory, up to --replay-log-mb, to replay to a shard that restarts from scratch; ctr-lr, ctr-fm: 500: a checkpoint's delta holds every row pushed since the one before, and their ID spaces are wide enough that at shorter intervals that is still a large share of the rows)")
    ("checkpoint-full-every", number_flag(&c.checkpoints.incremental.full_every, "N", config_bounds::checkpoint_full_every),
     "each shard's checkpoint is a full base at least every N checkpoints, and between them a delta of what "
     "changed since its previous one (1: every checkpoint full)")
    ("checkpoint-delta-fraction", number_flag(&c.checkpoints.incremental.delta_fraction, "F", config_bounds::checkpoint_delta_fraction),
     "a shard writes a full base instead of a delta once its chain's deltas would pass this fraction of the "
     "base's bytes (a restore reads the base and its deltas: at most 1 + F times a base)")
    ("checkpoint-stream-mb", number_flag<uint64_t>(&f.stream_mb, "N", 0, uint64_t{1} << 30),
     "a shard streams a checkpoint of at least N MiB into its file as it encodes it, never holding it whole "
     "in memory, and builds smaller ones in memory, kept until written (default 0: every checkpoint streams; "
     "a streamed one whose write fails is written again only while the shard has not changed)")
    ("replay-log-mb", number_flag<uint64_t>(&f.replay_log_mb, "N", 0, uint64_t{1} << 30),
     "MiB of pushes each worker's replay log may hold (plus one checkpoint interval's); a worker over it "
     "pauses at the next checkpoint step until that checkpoint commits; without checkpoints the log drops "
     "its oldest pushes instead, and a shard restarted after that rolls the run back to step 0 (0: a "
     "quarter of this machine's memory, shared by the workers)")
    ("storage-deadline-s", number_flag<uint64_t>(&f.storage_deadline_s, "SECONDS", 1, config_bounds::storage_deadline_ms.max / 1000),
     "fail the run when checkpoints keep failing this long (a full or read-only disk); its last good "
     "checkpoint stays for --resume")
    ("kill", text_flag(&f.kills_text, "SPEC", false), "kill actors at steps, shorthand for kill faults: shard:0@step=40,worker:1@90")
    ("faults", text_flag(&f.faults_text, "PLAN", false), "fault plan, e.g. kill:shard:0@40,drop:worker:1@55x3,"
                                        "reorder:worker:0>shard:1@push=90x2,eio:fsync@1500ms "
                                        "(actors/faults/fault_plan.hpp has the grammar)")
    ("random-faults", number_flag(&f.random_seed, "SEED", uint64_t{0}, UINT64_MAX, false),
     "add a random fault plan drawn from this seed")
    ("fault-rate", number_flag(&f.fault_rate, "R", 0.01, 100.0), "random faults per 100 steps")
    ("fault-mix", text_flag(&f.mix_text, "FAMILIES"),
     "random fault families: kills,supervisors,messages,storage,timed or all; and nodes, membership (keel cluster)")
    ("request-timeout", number_flag<uint64_t>(&f.request_timeout_ms, "MS", config_bounds::request_timeout_ms.min,
                                                    config_bounds::request_timeout_ms.max),
     "milliseconds before a worker retries a pull or push")
    ("stall-timeout-ms", number_flag<uint64_t>(&f.stall_timeout_ms, "MS", config_bounds::stall_timeout_ms.min,
                                                config_bounds::stall_timeout_ms.max),
     "fail the run, naming the workers it waits for, when no worker completes a step this long "
     "(0: --node-wait-ms + --storage-deadline-s + 10 x --request-timeout; none for an application's "
     "own loops in keel train's process)")
    ("report", text_flag(&f.report_path, "FILE", false), "write a JSON report here (keel plot draws it)")
    ("plot", text_flag(&f.plot_path, "FILE", false), "draw the run as SVG here (what keel plot draws)")
    ("data-dir", text_flag(&f.data_dir, "DIR", false), "dataset cache (default: ~/.cache/keel; fill it with scripts/fetch-mnist.sh)")
    ("train-limit", number_flag(&f.train_limit, "N"), "use only this many training examples (0: all)")
    ("test-limit", number_flag(&f.test_limit, "N"), "evaluate on only this many test examples (0: all)")
    ("scorers", text_flag(&f.scorers, "WHO"), "who scores the held-out slices of ctr-lr and ctr-fm: "
                                               "workers (each pulls only its slices' rows) | coordinator")
    ("timeout", number_flag<uint64_t>(&f.timeout_s, "SECONDS", 1, 1000000000), "give up after this many seconds")
    ("quiet", "print only the result")
    ("verbose", "print every event, checkpoints and retries included");
}

std::string flag_of_field(const std::string& field) {
  if (field.rfind("training.rules[", 0) == 0)
    return "--rules";
  static const std::pair<const char*, const char*> flags[] = {
    {"training.shards", "--shards"},
    {"training.workers", "--workers"},
    {"training.batch_size", "--batch"},
    {"training.steps", "--steps"},
    {"training.optimizer.lr", "--lr"},
    {"training.tables.capacity_rows", "--table-capacity"},
    {"checkpoints.incremental.full_every", "--checkpoint-full-every"},
    {"checkpoints.incremental.delta_fraction", "--checkpoint-delta-fraction"},
    {"recovery.request_timeout", "--request-timeout"},
    {"checkpoints.storage_deadline", "--storage-deadline-s"},
    {"recovery.stall_timeout", "--stall-timeout-ms"},
  };
  for (auto& [path, flag] : flags)
    if (field == path)
      return flag;
  return "";
}

}  // namespace keel::cli
