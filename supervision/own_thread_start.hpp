#pragma once
// A start function that blocks (a spawn on another node waits for the
// node's answer) run as a pending start on a thread of its own, so that the
// supervisor, which runs on CAF's scheduler, never holds one of its threads
// while it waits. The supervisor awaits the answer as for any pending start
// (supervisor.hpp): what the start function returns is the answer, an
// exception it throws a failed start, and `timeout` bounds the wait (set it
// above the start function's own bounds, so that only a start that hangs
// is cut short).

#include "supervision/child_spec.hpp"

namespace keel::supervision {

// `spec` with its start function run on a thread of its own: start_pending
// set, start cleared, start_timeout `timeout`. Each start spawns a detached
// actor that runs the start function once, answers and ends.
child_spec start_on_own_thread(child_spec spec, clock::duration timeout);

}  // namespace keel::supervision
