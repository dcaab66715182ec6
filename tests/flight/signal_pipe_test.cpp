// Signals as bytes on a pipe (flight/signal_pipe.hpp): each signal reaches
// the pipe installed for it, in order; a pipe's end puts the old handler
// back; on_signals runs its callback on a thread of its own.
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "flight/signal_pipe.hpp"

namespace distlab::flight {
namespace {

std::atomic<int> old_handler_calls{0};
void old_handler(int) { ++old_handler_calls; }

TEST(SignalPipe, EachSignalReachesItsOwnPipeInOrder) {
  SignalPipe first({SIGUSR1});
  SignalPipe second({SIGUSR2, SIGWINCH});
  ::raise(SIGUSR2);
  ::raise(SIGUSR1);
  ::raise(SIGWINCH);
  ::raise(SIGUSR2);
  EXPECT_EQ(first.take(), (std::vector<int>{SIGUSR1}));
  EXPECT_EQ(second.take(), (std::vector<int>{SIGUSR2, SIGWINCH, SIGUSR2}));
  EXPECT_TRUE(first.take().empty()) << "take() returns each signal once";
  struct pollfd nothing{first.fd(), POLLIN, 0};
  EXPECT_EQ(::poll(&nothing, 1, 0), 0) << "an empty pipe is not readable";
}

TEST(SignalPipe, ItsEndPutsTheOldHandlerBack) {
  struct sigaction mine {}, saved {};
  mine.sa_handler = old_handler;
  sigemptyset(&mine.sa_mask);
  ::sigaction(SIGUSR2, &mine, &saved);
  old_handler_calls = 0;
  {
    SignalPipe pipe({SIGUSR2});
    ::raise(SIGUSR2);
    EXPECT_EQ(pipe.take(), (std::vector<int>{SIGUSR2}));
    EXPECT_EQ(old_handler_calls.load(), 0);
  }
  ::raise(SIGUSR2);
  EXPECT_EQ(old_handler_calls.load(), 1);
  ::sigaction(SIGUSR2, &saved, nullptr);
}

TEST(SignalPipe, OnSignalsRunsTheCallbackOnItsOwnThread) {
  static std::atomic<int> calls{0};
  static std::atomic<bool> other_thread{false};
  static const std::thread::id test_thread = std::this_thread::get_id();
  on_signals({SIGURG}, [](int number) {
    other_thread = std::this_thread::get_id() != test_thread;
    if (number == SIGURG) ++calls;
  });
  ::raise(SIGURG);
  ::raise(SIGURG);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (calls.load() < 2 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(calls.load(), 2);
  EXPECT_TRUE(other_thread.load());
}

TEST(SignalPipe, ANumberThatIsNoSignalIsRefused) {
  EXPECT_THROW(SignalPipe({0}), std::invalid_argument);
  EXPECT_THROW(SignalPipe({NSIG}), std::invalid_argument);
}

}  // namespace
}  // namespace distlab::flight
