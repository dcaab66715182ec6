// Which thread runs a backward, and work that must run on the one that called it.
//
// PyTorch's autograd engine runs the backward of CPU tensors on the thread
// that called backward(), but the backward of CUDA tensors on one engine
// thread per device, shared by every thread of the process. Thread ranks
// sharing a GPU (--backend threads --device cuda) therefore run all their
// backwards, node by node, on that one thread:
//
//   rank 0 thread: backward() ...waits.............................
//   rank 1 thread: backward() ...waits.............................
//   cuda:0 thread: r0 node, r1 node, r0 node, r1 node, ... r0's final callback
//
// A wait for another rank made there never ends: the other rank's nodes
// queue behind it. Two kinds of waits meet this:
//
// - the end of a gradient reduction (DDP, ZeRO-1/2/3 wait for their buckets
//   once the whole backward is done). It does not need to happen there:
//   BackwardCaller hands it to the thread that called backward(), which
//   runs it before backward() returns, the same promise as on the CPU;
// - a wait in the middle of the backward, whose result the next node needs
//   (tensor and context parallelism's collectives, experts' all-to-all,
//   ZeRO-3's gathers). It cannot move. The threads backend refuses it with
//   the reason (refuse_wait_on_engine_thread) instead of hanging:
//   those layouts need one process per GPU.
//
// DistLab installs an engine that differs from PyTorch's in two things only:
// its device threads say which device they serve (engine_device_thread),
// and backward() runs the work handed to its caller before returning.
#pragma once

#include <functional>
#include <memory>
#include <string>

namespace distlab::comm {

// The device index whose autograd engine thread this thread is, or -1.
int engine_device_thread();

struct CallerQueue;  // a thread's work handed over by its backwards

// Work queued by a hook during a backward, to run once the whole backward is
// done, on the thread that called backward().
class BackwardCaller {
 public:
  BackwardCaller();

  // Remembers this thread as the one that will call backward(): call it
  // where the backward's graph is made (a forward), on that thread.
  void capture();

  // From a hook of the running backward: `fn` runs once the whole backward
  // is done, on the captured thread, before its backward() returns. On that
  // thread itself, this is PyTorch's queue_callback.
  void at_end(std::function<void()> fn) const;

 private:
  std::shared_ptr<CallerQueue> queue_;
};

// Why thread ranks sharing a GPU cannot wait for each other inside the
// backward, and what to run instead: the end of every refusal of it (the
// plan's, before a job starts; the threads backend's, at the wait).
std::string shared_engine_thread_reason();

// Throws CommError when this thread is a device's engine thread: `self` is
// the rank saying it, `waiting_for` what it would wait for ("rank 2"). The
// threads backend calls it before a wait when its ranks share a GPU.
void refuse_wait_on_engine_thread(const std::string& self, const std::string& waiting_for);

// Test support, for the CPU, where the engine has no device threads: every
// BackwardCaller hands its end work over as from a device thread (on), and
// this thread says it is device `device`'s engine thread (-1: it is not).
void hand_over_for_tests(bool on);
void pretend_engine_device_thread_for_tests(int device);

}  // namespace distlab::comm
