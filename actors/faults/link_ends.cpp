// The names of an actor's links, made once, so a message on a link with
// faults armed costs no string building on the way through.
#include "actors/faults/link_ends.hpp"

namespace keel {

link_ends::link_ends(std::shared_ptr<link_faults> faults, std::string me,
                     const std::string& peer_kind, uint32_t peers)
  : faults_(std::move(faults)), me_(std::move(me)), peer_kind_(peer_kind) {
  if (!faults_)
    return;
  peers_.reserve(peers);
  for (uint32_t i = 0; i < peers; ++i) {
    auto name = peer_kind + std::to_string(i);
    peers_.push_back({name, name + ">" + me_, me_ + ">" + name});
  }
}

const link_ends::peer_link& link_ends::link_of(uint32_t peer, peer_link& stray) const {
  if (peer < peers_.size())
    return peers_[peer];
  auto name = peer_kind_ + std::to_string(peer);
  stray = {name, name + ">" + me_, me_ + ">" + name};
  return stray;
}

}  // namespace keel
