// Work handed to the thread that called backward, and the refusal of a wait
// on a device's engine thread (comm/backward_thread.hpp). The CPU engine has
// no device threads, so the tests make the hand-over happen as it does from
// one (hand_over_for_tests) and say which events came in which order.
#include <gtest/gtest.h>
#include <torch/csrc/autograd/engine.h>
#include <torch/torch.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "comm/backward_thread.hpp"
#include "comm/errors.hpp"

namespace distlab::comm {
namespace {

// Events in the order they happened, each with the thread it ran on.
struct Events {
  std::mutex mutex;
  std::vector<std::string> names;
  std::vector<std::thread::id> threads;
  void add(const std::string& name) {
    std::lock_guard<std::mutex> lock(mutex);
    names.push_back(name);
    threads.push_back(std::this_thread::get_id());
  }
};

// A backward whose one hook queues `handed` through a BackwardCaller and
// then `direct` through PyTorch's queue_callback; a line after backward()
// returns says "returned".
void backward_with_two_end_callbacks(Events& events, bool hand_over) {
  hand_over_for_tests(hand_over);
  BackwardCaller caller;
  caller.capture();
  const at::Tensor w = torch::ones({3}, torch::requires_grad());
  const at::Tensor loss = (w * 2).sum();
  w.register_hook([&](const at::Tensor& grad) {
    events.add("hook");
    caller.at_end([&] { events.add("handed"); });
    torch::autograd::Engine::get_default_engine().queue_callback([&] { events.add("direct"); });
    return grad;
  });
  loss.backward();
  events.add("returned");
  hand_over_for_tests(false);
}

TEST(BackwardCaller, OnTheCallingThreadItIsPyTorchsEndOfBackwardCallback) {
  Events events;
  backward_with_two_end_callbacks(events, /*hand_over=*/false);
  EXPECT_EQ(events.names, (std::vector<std::string>{"hook", "handed", "direct", "returned"}));
}

TEST(BackwardCaller, HandedOverWorkRunsOnTheCallerAfterTheEnginesCallbacksBeforeBackwardReturns) {
  Events events;
  backward_with_two_end_callbacks(events, /*hand_over=*/true);
  // "handed" after "direct": it went through the caller's queue, not the
  // engine's callbacks; before "returned": backward() ran it.
  ASSERT_EQ(events.names, (std::vector<std::string>{"hook", "direct", "handed", "returned"}));
  EXPECT_EQ(events.threads[2], std::this_thread::get_id());
}

TEST(BackwardCaller, AFailingBackwardDropsItsHandedOverWork) {
  Events events;
  hand_over_for_tests(true);
  BackwardCaller caller;
  caller.capture();
  const at::Tensor w = torch::ones({2}, torch::requires_grad());
  w.register_hook([&](const at::Tensor& grad) {
    caller.at_end([&] { events.add("handed"); });
    throw std::runtime_error("a node failed");
    return grad;
  });
  EXPECT_THROW((w * 3).sum().backward(), std::exception);
  // The next backward on this thread runs only its own work.
  const at::Tensor v = torch::ones({2}, torch::requires_grad());
  (v * 3).sum().backward();
  hand_over_for_tests(false);
  EXPECT_TRUE(events.names.empty()) << "ran: " << events.names.front();
  EXPECT_TRUE(v.grad().equal(torch::full({2}, 3.0)));
}

TEST(BackwardCaller, HandedOverWorkThatThrowsMakesBackwardThrowAfterTheRestRan) {
  Events events;
  hand_over_for_tests(true);
  BackwardCaller first, second;
  first.capture();
  second.capture();
  const at::Tensor w = torch::ones({2}, torch::requires_grad());
  w.register_hook([&](const at::Tensor& grad) {
    first.at_end([] { throw CommError("bucket 0 failed"); });
    second.at_end([&] { events.add("second"); });
    return grad;
  });
  try {
    (w * 3).sum().backward();
    ADD_FAILURE() << "backward returned";
  } catch (const CommError& e) {
    EXPECT_STREQ(e.what(), "bucket 0 failed");
  }
  hand_over_for_tests(false);
  EXPECT_EQ(events.names, (std::vector<std::string>{"second"}));
}

TEST(EngineThread, AWaitThereIsRefusedNamingTheRankTheGpuAndTheWayOut) {
  EXPECT_EQ(engine_device_thread(), -1);
  EXPECT_NO_THROW(refuse_wait_on_engine_thread("rank 0: all_reduce", "rank 1"));
  std::string message;
  std::thread([&] {
    pretend_engine_device_thread_for_tests(0);
    try {
      refuse_wait_on_engine_thread("rank 0: all_reduce(4 Float elements, sum)", "rank 1");
    } catch (const CommError& e) {
      message = e.what();
    }
  }).join();
  EXPECT_NE(message.find("rank 0: all_reduce(4 Float elements, sum): would wait for rank 1 inside a backward"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("engine's thread for cuda:0"), std::string::npos) << message;
  EXPECT_NE(message.find("one process per GPU"), std::string::npos) << message;
}

}  // namespace
}  // namespace distlab::comm
