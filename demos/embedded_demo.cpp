// The embedded demo: one actor system in this process, a worker actor that
// pushes gradients as Cap'n Proto messages to a shard actor, which decodes,
// validates and applies each push and acknowledges it. Prints what it
// measured. Later issues grow this into the training demo.
#include <chrono>
#include <cstring>
#include <iostream>
#include <vector>

#include <boost/program_options.hpp>
#include <caf/all.hpp>

#include "messages/decode.hpp"
#include "messages/register_types.hpp"

namespace po = boost::program_options;
using namespace keel;

namespace {

struct shard_state {
  std::vector<float> params;
  uint64_t version = 0;
  uint64_t applied_seq = 0;
};

// Applies each push once (seq dedup) and acknowledges it with its version.
caf::behavior shard(caf::stateful_actor<shard_state>* self, size_t n_params) {
  self->state.params.assign(n_params, 0.0f);
  return {[self](const push_msg& m) -> caf::result<push_ack_msg> {
    auto push = decode(m);
    if (!push)
      return push.error();
    auto r = push->root();
    auto& st = self->state;
    bool duplicate = r.getSeq() <= st.applied_seq;
    if (!duplicate) {
      for (auto range : r.getDense()) {
        if (range.getEnd() > st.params.size())
          return make_error(errc::invalid_field, "range beyond the shard's " +
                                                   std::to_string(st.params.size()) + " keys");
        auto values = range.getValues();
        std::vector<float> g((range.getEnd() - range.getBegin()));
        std::memcpy(g.data(), values.begin(), values.size());
        for (size_t i = 0; i < g.size(); ++i)
          st.params[range.getBegin() + i] -= 0.01f * g[i];
      }
      st.applied_seq = r.getSeq();
      ++st.version;
    }
    return build<schema::PushAck>(32, [&](schema::PushAck::Builder b) {
      b.setWorker(r.getWorker());
      b.setSeq(r.getSeq());
      b.setShardVersion(st.version);
      b.setStatus(duplicate ? schema::PushAck::Status::DUPLICATE : schema::PushAck::Status::APPLIED);
    });
  }};
}

}  // namespace

int main(int argc, char** argv) {
  size_t pushes = 200;
  size_t floats = 262144;
  po::options_description opts("keel-demo: pushes between two actors in one process");
  opts.add_options()("help", "show this help")(
    "pushes", po::value<size_t>(&pushes)->default_value(pushes), "number of pushes")(
    "floats", po::value<size_t>(&floats)->default_value(floats), "gradient values per push");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "keel-demo: " << e.what() << "\n" << opts;
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts;
    return 0;
  }
  if (pushes == 0 || floats == 0) {
    std::cerr << "keel-demo: --pushes and --floats must be positive\n";
    return 2;
  }

  caf::actor_system_config cfg;
  register_message_types(cfg);
  cfg.set("scheduler.max-threads", 2);
  caf::actor_system sys{cfg};
  auto s = sys.spawn(shard, floats);
  caf::scoped_actor worker{sys};
  std::vector<float> grad(floats, 1.0f);
  uint64_t acked = 0, last_version = 0;
  bool failed = false;
  auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < pushes && !failed; ++i) {
    auto m = build<schema::Push>(floats / 2 + 64, [&](schema::Push::Builder b) {
      b.setWorker(0);
      b.setSeq(i + 1);
      b.setStep(i);
      auto range = b.initDense(1)[0];
      range.setBegin(0);
      range.setEnd(floats);
      std::memcpy(range.initValues(floats * 4).begin(), grad.data(), floats * 4);
    });
    worker->request(s, std::chrono::seconds(10), m)
      .receive(
        [&](const push_ack_msg& ack) {
          if (auto a = decode(ack)) {
            ++acked;
            last_version = a->root().getShardVersion();
          }
        },
        [&](caf::error& e) {
          std::cerr << "keel-demo: push " << i + 1 << " failed: " << sys.render(e) << "\n";
          failed = true;
        });
  }
  auto secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  double mib = static_cast<double>(acked * floats * 4) / (1 << 20);
  std::cout << "keel-demo: " << acked << "/" << pushes << " pushes of " << floats * 4 / 1024
            << " KiB acknowledged, shard version " << last_version << "\n"
            << "keel-demo: " << secs * 1e3 << " ms, " << acked / secs << " pushes/s, " << mib / secs
            << " MiB/s (build + send + decode + apply + ack)\n";
  worker->send_exit(s, caf::exit_reason::user_shutdown);
  return failed || acked != pushes ? 1 : 0;
}
