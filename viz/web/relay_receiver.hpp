// The live stream in a browser: the page's WebSocket to the class server
// (viz/web/serve.mjs), which relays the ranks' TCP streams. Each WebSocket
// message is one relayed chunk: a 4-byte little-endian stream id, then the
// bytes that stream's rank sent (an empty chunk: the stream ended). Each
// stream is read by the library's own trace::LiveLineDecoder, as
// trace::LiveReceiver reads a TCP connection.
//
// The same interface as trace::LiveReceiver, so LiveFeed (live_feed.hpp)
// and the Trace panel are the same code in both builds. One thread: the
// page's JavaScript hands the bytes over between frames.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "trace/live_stream.hpp"

namespace distlab::viz {

class RelayReceiver {
 public:
  // Opens the page's WebSocket to the server it was loaded from (port and
  // bind_host are the native listener's and mean nothing here).
  RelayReceiver(int port, const std::string& bind_host);
  ~RelayReceiver();
  RelayReceiver(const RelayReceiver&) = delete;
  RelayReceiver& operator=(const RelayReceiver&) = delete;

  int port() const { return 0; }
  const std::string& url() const { return url_; }  // ws://HOST:PORT/live
  std::vector<trace::Event> drain();
  std::vector<std::string> errors() const { return errors_; }
  uint64_t wait_for(uint64_t, int) { return total_; }  // one thread: nothing can arrive while waiting
  uint64_t total() const { return total_; }
  std::map<int, trace::ClockOffset> clock_offsets() const { return offsets_; }

  // From the page: a relayed chunk (size 0: the stream ended).
  void receive(uint32_t stream, const char* data, size_t size);

 private:
  std::string url_;
  std::map<uint32_t, trace::LiveLineDecoder> streams_;
  std::vector<trace::Event> pending_;
  std::vector<std::string> errors_;
  std::map<int, trace::ClockOffset> offsets_;
  uint64_t total_ = 0;
};

}  // namespace distlab::viz
