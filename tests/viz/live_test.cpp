// The live stream, without any GUI: a traced program (ranks as threads,
// DISTLAB_TRACE_LIVE set, as a lesson would run) streams to the viewer's
// LiveFeed; every event arrives whole and in order, arrows pair up. Garbage
// on the socket is refused with a message and does not disturb good senders.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <random>

#include "live_feed.hpp"
#include "render_helpers.hpp"
#include "trace_panel.hpp"
#include "viz_test_util.hpp"

namespace distlab::viz {
namespace {

using namespace testing_util;

constexpr int kWaitMs = 30000;

// What rank `rank` of live_emitter records, in order: (name, seq).
std::vector<std::pair<std::string, std::string>> expected_sequence(int events) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < events; ++i) {
    if (i % 4 != 3) {
      out.emplace_back("work " + std::to_string(i), std::to_string(i));
    } else {
      out.emplace_back("send", std::to_string(i));
      out.emplace_back("recv", std::to_string(i));
    }
  }
  return out;
}

int run_emitter(int port, int ranks, int events, int rank_offset = 0) {
  std::string output;
  const int code = run({VIZ_LIVE_EMITTER, "--ranks", std::to_string(ranks), "--events", std::to_string(events),
                        "--rank-offset", std::to_string(rank_offset)},
                       {"DISTLAB_TRACE_LIVE=127.0.0.1:" + std::to_string(port)}, &output, kWaitMs);
  EXPECT_EQ(code, 0) << output;
  return code;
}

// Checks that `model` holds exactly the emitter's events for these ranks, in
// the order each rank recorded them.
void expect_every_event_in_order(const TraceModel& model, int first_rank, int ranks, int events) {
  std::map<int, std::vector<std::pair<std::string, std::string>>> got;
  for (uint32_t i = 0; i < model.size(); ++i) {  // model order = arrival order
    const trace::Event e = model.event(i);
    got[e.rank].emplace_back(e.name, e.arg("seq"));
  }
  const auto want = expected_sequence(events);
  for (int r = first_rank; r < first_rank + ranks; ++r) EXPECT_EQ(got[r], want) << "rank " << r;
}

TEST(LiveStream, TracedProgramsEventsAllArriveInOrder) {
  LiveFeed feed(0, "127.0.0.1");
  const int ranks = 4;
  const int events = 2000;
  ASSERT_EQ(run_emitter(feed.port(), ranks, events), 0);
  const uint64_t total = ranks * (events + events / 4);
  EXPECT_EQ(feed.wait_for(total, kWaitMs), total);
  TraceModel model;
  EXPECT_EQ(feed.poll(model), total);
  model.finalize();
  expect_every_event_in_order(model, 0, ranks, events);
  EXPECT_EQ(model.flow_count(), static_cast<size_t>(ranks * (events / 4)));  // every send met its recv
  EXPECT_TRUE(feed.errors().empty());
}

TEST(LiveStream, SeveralProcessesAtOnce) {
  LiveFeed feed(0, "127.0.0.1");
  const int events = 500;
  std::vector<pid_t> pids;
  for (int process = 0; process < 3; ++process)
    pids.push_back(spawn({VIZ_LIVE_EMITTER, "--ranks", "2", "--events", std::to_string(events), "--rank-offset",
                          std::to_string(2 * process)},
                         {"DISTLAB_TRACE_LIVE=127.0.0.1:" + std::to_string(feed.port())}));
  for (pid_t pid : pids) EXPECT_EQ(wait_exit(pid, kWaitMs), 0);
  const uint64_t total = 6 * (events + events / 4);
  EXPECT_EQ(feed.wait_for(total, kWaitMs), total);
  TraceModel model;
  feed.poll(model);
  model.finalize();
  expect_every_event_in_order(model, 0, 6, events);
  EXPECT_EQ(model.rows().size(), 12u);
}

TEST(LiveStream, TracePanelShowsWhatArrives) {
  TracePanel panel;
  panel.listen(0, "127.0.0.1");
  ASSERT_NE(panel.live(), nullptr);
  ASSERT_EQ(run_emitter(panel.live()->port(), 3, 400), 0);
  const size_t total = 3 * (400 + 400 / 4);
  // The panel rebuilds its rows a few times a second while events come in.
  for (int i = 0; i < 500 && !(panel.model().size() == total && panel.model().flow_count() == 300); ++i) {
    panel.update();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(panel.model().size(), total);
  EXPECT_EQ(panel.model().rows().size(), 6u);
  EXPECT_EQ(panel.model().flow_count(), 300u);  // 3 ranks x 100 messages, each paired
  expect_every_event_in_order(panel.model(), 0, 3, 400);
}

// Counter samples come down the same stream: the Trace panel's memory
// track gets every rank's samples in the order recorded, with the totals
// the emitter's rule gives (live_emitter.cpp, memory_sample), and draws a
// row for each rank.
TEST(LiveStream, MemorySamplesReachTheMemoryTrack) {
  TracePanel panel;
  panel.listen(0, "127.0.0.1");
  const int ranks = 3, events = 40, samples = 24;
  std::string output;
  ASSERT_EQ(run({VIZ_LIVE_EMITTER, "--ranks", std::to_string(ranks), "--events", std::to_string(events), "--memory",
                 std::to_string(samples)},
                {"DISTLAB_TRACE_LIVE=127.0.0.1:" + std::to_string(panel.live()->port())}, &output, kWaitMs),
            0)
      << output;
  const size_t intervals = ranks * (events + events / 4);
  const size_t counters = ranks * (samples + 1);  // and one accounting sample each
  for (int i = 0; i < 500 && !(panel.model().size() == intervals && panel.model().counter_count() == counters); ++i) {
    panel.update();
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(panel.model().size(), intervals);
  ASSERT_EQ(panel.model().counter_count(), counters);
  EXPECT_EQ(panel.model().rows().size(), static_cast<size_t>(2 * ranks));  // compute and comm: no counter row

  const MemoryModel& memory = panel.memory();
  EXPECT_EQ(memory.stages(), std::vector<std::string>{"ZeRO-2"});
  ASSERT_EQ(memory.timeline_ranks(), (std::vector<int>{0, 1, 2}));
  for (int r = 0; r < ranks; ++r) {
    const std::vector<MemoryPoint>& line = memory.timeline(r);
    ASSERT_EQ(line.size(), static_cast<size_t>(samples)) << "rank " << r;
    int64_t best = -1;
    int best_k = -1;
    for (int k = 0; k < samples; ++k) {
      const int64_t total = 1000 * (r + 1) + 100 * k + 7 + 50 * (k % 3);
      EXPECT_EQ(line[k].total, total) << "rank " << r << " sample " << k;
      if (k > 0) {
        EXPECT_GE(line[k].at_us, line[k - 1].at_us);
      }
      if (total > best) best = total, best_k = k;
    }
    const auto peak = memory.peak("ZeRO-2", r);
    ASSERT_TRUE(peak.has_value());
    EXPECT_EQ(peak->total(), best);
    EXPECT_EQ(peak->bytes[1], 100 * best_k);  // gradients
    const auto formula = memory.accounting("ZeRO-2", r);
    ASSERT_TRUE(formula.has_value());
    EXPECT_EQ(formula->total(), 1000 * (r + 1) + 250);
  }

  HeadlessRenderer renderer(1000, 700);
  render_in_window(renderer, [&] { panel.draw(); });
  const TraceFrameLayout& layout = panel.last_layout();
  ASSERT_TRUE(layout.memory_drawn);
  EXPECT_EQ(layout.memory_ranks, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(layout.memory_full_bytes, 3000 + 2300 + 7 + 100);  // rank 2, k = 23
}

int connect_to(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

void send_text(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n <= 0) return;  // the receiver hung up on us: that is the point
    done += static_cast<size_t>(n);
  }
}

bool wait_for_errors(const LiveFeed& feed, size_t count) {
  for (int i = 0; i < 500 && feed.errors().size() < count; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return feed.errors().size() >= count;
}

TEST(LiveStream, GarbageIsRefusedWithAMessageAndGoodSendersStillArrive) {
  LiveFeed feed(0, "127.0.0.1");
  // 1: random bytes instead of the hello.
  std::mt19937 rng(11);
  std::string noise(4096, '\0');
  for (char& c : noise) c = static_cast<char>(rng());
  int fd = connect_to(feed.port());
  ASSERT_GE(fd, 0);
  send_text(fd, noise + "\n");
  ASSERT_TRUE(wait_for_errors(feed, 1));
  close(fd);
  // 2: a good hello, then a malformed event line.
  fd = connect_to(feed.port());
  send_text(fd, std::string(trace::kLiveHello) + "\n{\"ph\":\"X\",\"pid\":\n");
  ASSERT_TRUE(wait_for_errors(feed, 2));
  close(fd);
  // 3: a line that never ends (the receiver must not buffer it all).
  fd = connect_to(feed.port());
  send_text(fd, std::string(trace::kLiveHello) + "\n" + std::string(4 * trace::kLiveMaxLineBytes, 'x'));
  ASSERT_TRUE(wait_for_errors(feed, 3));
  close(fd);
  for (const std::string& e : feed.errors()) EXPECT_NE(e.find("live receiver"), std::string::npos) << e;
  EXPECT_EQ(feed.total(), 0u);

  // A real sender afterwards is received whole.
  ASSERT_EQ(run_emitter(feed.port(), 2, 300), 0);
  const uint64_t total = 2 * (300 + 300 / 4);
  EXPECT_EQ(feed.wait_for(total, kWaitMs), total);
  TraceModel model;
  feed.poll(model);
  model.finalize();
  expect_every_event_in_order(model, 0, 2, 300);
}

// A line that is valid JSON but carries a "flow" that is not a number must be
// refused like any other bad line. Run in a child process: if the receiver's
// thread dies of it, the whole process aborts, and only the child goes.
TEST(LiveStream, ANonNumericFlowIdIsRefusedNotFatal) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    LiveFeed feed(0, "127.0.0.1");
    const int fd = connect_to(feed.port());
    send_text(fd, std::string(trace::kLiveHello) + "\n{\"ph\":\"X\",\"pid\":0,\"args\":{\"flow\":\"zz\"}}\n");
    const bool refused = wait_for_errors(feed, 1);
    close(fd);
    _exit(refused ? 0 : 3);
  }
  const int code = wait_exit(child, kWaitMs);
  EXPECT_EQ(code, 0) << (code == 128 + SIGABRT
                             ? "the receiver aborted: parse_event_line let std::stoull's exception out and "
                               "LiveReceiver catches only TraceFormatError (lib/trace)"
                             : "the line was not refused");
}

TEST(LiveStream, ListensOnLoopbackUnlessToldOtherwise) {
  LiveFeed feed(0, "127.0.0.1");
  // /proc/net/tcp lists the listening socket's local address in hex:
  // 0100007F is 127.0.0.1.
  std::ifstream tcp("/proc/net/tcp");
  std::string line;
  char port_hex[8];
  std::snprintf(port_hex, sizeof port_hex, "%04X", feed.port());
  bool found = false;
  while (std::getline(tcp, line)) {
    if (line.find(std::string(":") + port_hex + " ") == std::string::npos || line.find(" 0A ") == std::string::npos)
      continue;  // 0A = LISTEN
    found = true;
    EXPECT_NE(line.find("0100007F:" + std::string(port_hex)), std::string::npos) << line;
  }
  EXPECT_TRUE(found);
  EXPECT_THROW(LiveFeed(0, "not-an-address"), std::runtime_error);
}

}  // namespace
}  // namespace distlab::viz
