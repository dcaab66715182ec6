#include "live_feed.hpp"

namespace distlab::viz {

LiveFeed::LiveFeed(int port, const std::string& bind_host) : bind_host_(bind_host), receiver_(port, bind_host) {}

size_t LiveFeed::poll(TraceModel& model) {
  std::vector<trace::Event> events = receiver_.drain();
  model.add(events);
  return events.size();
}

}  // namespace distlab::viz
