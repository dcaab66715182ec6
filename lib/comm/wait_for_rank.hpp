// Holding every rank until one rank says go, for as long as a person takes.
//
// Every other wait in DistLab ends after the communicator's timeout (three
// minutes by default, half a second in some tests): that is how a rank that
// died or hangs is told apart from a slow one. A pause that a person makes
// is neither, and may last far longer than any timeout: an instructor
// reading a slide while rank 0 waits for Enter (a lesson run with --step,
// lessons/common/lesson.hpp). This is the one wait with a bound of its own.
//
//   rank 0:   (waits for Enter)  wait_for_rank(comm, 0, tag)   sends "go" to every other rank
//   others:                      wait_for_rank(comm, 0, tag)   wait for that "go", up to `limit`
//
// Every rank calls it. A rank that passes `limit` throws TimeoutError naming
// the rank it waited for; a rank that died still ends the wait at once (its
// connection closes, or the thread ranks' job aborts).
#pragma once

#include <chrono>

#include "comm/communicator.hpp"

namespace distlab::comm {

// Long enough for any class; short enough that a job forgotten at a prompt ends.
inline constexpr Milliseconds kPersonWaitLimit{std::chrono::hours(2)};

// `root` sends a one-element message with `tag` to every other rank (its
// sends wait as long as the communicator's timeout: the others are already
// at this call, or soon will be); every other rank waits for it up to
// `limit`. `tag` must be one no other message of the job uses.
void wait_for_rank(Communicator& comm, int root, int tag, Milliseconds limit = kPersonWaitLimit);

}  // namespace distlab::comm
