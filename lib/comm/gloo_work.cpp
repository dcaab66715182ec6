#include "comm/gloo_work.hpp"

#include "comm/peer_closed.hpp"

namespace distlab::comm {

void rethrow_gloo(const std::string& what, const std::exception& e, Milliseconds timeout, int peer) {
  std::string why = e.what();
  why = why.substr(0, why.find('\n'));
  if (why.find("Timed out") != std::string::npos || why.find("timed out") != std::string::npos)
    throw_timeout(what, timeout,
                  peer >= 0 ? "Rank " + std::to_string(peer) + " never did its side (is it still running?)" : "");
  if (why.find("closed") != std::string::npos || why.find("reset") != std::string::npos)
    throw PeerClosed(what + ": " + (peer >= 0 ? "rank " + std::to_string(peer) : std::string("a peer")) +
                     " closed the connection (did it exit or crash?): " + why);
  throw CommError(what + ": " + why);
}

void wait_gloo(const GlooWorkPtr& work, const std::string& what, Milliseconds limit, int peer) {
  try {
    work->wait(limit);
  } catch (const std::exception& e) {
    rethrow_gloo(what, e, limit, peer);
  }
}

}  // namespace distlab::comm
