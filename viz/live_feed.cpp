#include "live_feed.hpp"

namespace distlab::viz {

LiveFeed::LiveFeed(int port, const std::string& bind_host) : bind_host_(bind_host), receiver_(port, bind_host) {}

#ifdef __EMSCRIPTEN__
std::string LiveFeed::source() const { return receiver_.url(); }

std::string LiveFeed::announcement() const {
  return "following the live stream the server relays (" + receiver_.url() + "): run a lesson with --live to the "
         "port the server names for the ranks";
}
#else
std::string LiveFeed::source() const { return bind_host_ + ":" + std::to_string(port()); }

std::string LiveFeed::announcement() const {
  return "listening on " + source() + " (run a lesson with DISTLAB_TRACE_LIVE=" +
         (bind_host_ == "0.0.0.0" ? std::string("HOST") : bind_host_) + ":" + std::to_string(port()) + ")";
}
#endif

size_t LiveFeed::poll(TraceModel& model) {
  std::vector<trace::Event> events = receiver_.drain();
  model.add(events);
  return events.size();
}

}  // namespace distlab::viz
