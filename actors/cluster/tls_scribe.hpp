#pragma once
// A CAF scribe (one connection of CAF's middleman) that carries its bytes
// through a tls_session: how BASP runs over TLS on a connection keel's own
// gate accepted (or connected) and authenticated. CAF 0.17's libcaf_openssl
// makes its sessions only in its own doorman and connect paths, from the
// actor system's global settings and without a name check; this scribe
// takes a session whose handshake keel has already completed and verified,
// so no byte of an unverified peer reaches BASP. The scribe owns the
// session and the socket from then on (CAF's multiplexer closes it).

#include <memory>

#include <caf/fwd.hpp>
#include <caf/io/fwd.hpp>

#include "actors/net/tls.hpp"

namespace keel {

// `fd`: a connected, non-blocking socket; `session`: its TLS, handshake done.
caf::io::scribe_ptr make_tls_scribe(caf::actor_system& sys, int fd, std::unique_ptr<tls_session> session);

}  // namespace keel
