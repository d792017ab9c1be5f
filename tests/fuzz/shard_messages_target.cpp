// fuzz_one_shard_messages: bytes -> decode<Push> -> shard_core::offer, or
// bytes -> decode<PullRequest> -> shard_core::read, the handlers that walk a
// decoded message from a worker (see fuzz_targets.hpp).
//
// Byte 0 holds flags:
//   bit 0     the rest is a PullRequest (else a Push)
//   bit 1     the shard runs ASP with 4 workers (else BSP with 1, so a push
//             for step 0 completes its step and is applied)
//   bits 2-3  the shard's optimizer (sgd, momentum, adagrad, adam)
// The shard owns dense keys [0, 16384) and sparse keys [16384, 2^20): enough
// dense keys for a push whose ranges share one blob of values to be valid.

#include <vector>

#include "actors/core/shard_core.hpp"
#include "fuzz_targets.hpp"
#include "invariant.hpp"
#include "message_invariants.hpp"
#include "shard_state.hpp"

namespace keel::fuzz {

namespace {

constexpr const char* target = "fuzz_shard_messages";
constexpr uint64_t dense_keys = 16384;

shard_core small_shard(uint8_t flags) {
  static constexpr optimizer_kind kinds[] = {optimizer_kind::sgd, optimizer_kind::momentum,
                                             optimizer_kind::adagrad, optimizer_kind::adam};
  shard_config cfg;
  bool asp = (flags & 2) != 0;
  cfg.num_workers = asp ? 4 : 1;
  cfg.rule.kind = asp ? consistency_kind::asp : consistency_kind::bsp;
  cfg.optimizer.kind = kinds[(flags >> 2) & 3];
  cfg.dense = {0, dense_keys};
  cfg.sparse = {dense_keys, uint64_t{1} << 20};
  return std::move(*shard_core::make(cfg, std::vector<float>(dense_keys, 0.25f)));  // sizes agree
}

// A push is applied at most once: offered again it is a duplicate and
// changes nothing; refused, it changed nothing either. (Shards are
// move-only, so "before" and "after" are fresh shards given the same offers.)
void offer_push(const frame_ptr& f, uint8_t flags) {
  auto push = decode<schema::Push>(f);
  if (!push)
    return;
  using status = schema::PushAck::Status;
  auto shard = small_shard(flags);
  auto first = shard.offer(std::move(*push));
  if (first.status == status::REJECTED || first.status == status::OUT_OF_ORDER) {
    require(same_shard_state(shard, small_shard(flags)), target, "a refused push changed the shard");
    return;
  }
  require(first.status == status::APPLIED || first.status == status::ACCEPTED, target,
          "a first push is neither applied, accepted nor refused");
  auto once = small_shard(flags);
  once.offer(std::move(*decode<schema::Push>(f)));
  auto again = shard.offer(std::move(*decode<schema::Push>(f)));
  require(again.status == status::DUPLICATE, target, "a push offered twice is not a duplicate");
  require(same_shard_state(shard, once), target, "a duplicate push changed the shard");
}

// What a shard answers to a pull is a reply its own decoder accepts.
void answer_pull(const frame_ptr& f, uint8_t flags) {
  auto request = decode<schema::PullRequest>(f);
  if (!request)
    return;
  auto shard = small_shard(flags);
  if (!shard.can_serve(request->root().getClock()))
    return;
  caf::error err;
  auto reply = build<schema::PullReply>(64, [&](schema::PullReply::Builder b) {
    err = shard.read(request->root(), b);
  });
  if (err)
    return;
  auto decoded_reply = decode(reply);
  require(static_cast<bool>(decoded_reply), target,
          "a shard's reply to a pull is refused by decode: " +
            (decoded_reply ? std::string() : describe(decoded_reply.error())));
}

}  // namespace

int fuzz_one_shard_messages(const uint8_t* data, size_t size) {
  if (size == 0)
    return 0;
  auto f = frame::parse_copy(data + 1, size - 1, *buffer_pool::process_default());
  if (!f)
    return 0;
  if ((data[0] & 1) != 0)
    answer_pull(*f, data[0]);
  else
    offer_push(*f, data[0]);
  return 0;
}

}  // namespace keel::fuzz
