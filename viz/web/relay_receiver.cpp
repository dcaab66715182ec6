#include "relay_receiver.hpp"

#include <emscripten.h>

namespace distlab::viz {
namespace {

RelayReceiver* active = nullptr;  // the page has one live feed at a time

// The page's side (index.html): opens ws://HOST/live, hands each message to
// distlab_live_chunk, and writes the WebSocket's URL into `url`.
EM_JS(void, page_live_open, (char* url, int size), { stringToUTF8(Module.distlabLiveOpen(), url, size); });
EM_JS(void, page_live_close, (), { Module.distlabLiveClose(); });

}  // namespace

RelayReceiver::RelayReceiver(int, const std::string&) {
  active = this;
  char url[512] = {};
  page_live_open(url, sizeof url);
  url_ = url;
}

RelayReceiver::~RelayReceiver() {
  if (active == this) {
    active = nullptr;
    page_live_close();
  }
}

void RelayReceiver::receive(uint32_t stream, const char* data, size_t size) {
  if (size == 0) {
    streams_.erase(stream);
    return;
  }
  trace::LiveLineDecoder::Result got = streams_[stream].feed(data, size);
  for (const auto& [rank, offset] : got.offsets) offsets_[rank] = offset;
  total_ += got.events.size();
  for (auto& e : got.events) pending_.push_back(std::move(e));
  if (!got.problem.empty()) errors_.push_back(got.problem);
}

std::vector<trace::Event> RelayReceiver::drain() {
  std::vector<trace::Event> out;
  out.swap(pending_);
  return out;
}

}  // namespace distlab::viz

extern "C" EMSCRIPTEN_KEEPALIVE void distlab_live_chunk(uint32_t stream, const char* data, int size) {
  if (distlab::viz::active != nullptr) distlab::viz::active->receive(stream, data, static_cast<size_t>(size));
}
