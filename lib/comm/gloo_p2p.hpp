// Gloo's send and recv with the message's size checked on the receiving side.
//
// Gloo matches a send with a recv by (peer, tag) and nothing else: a message
// shorter than the recv fills part of it without a word, and a longer one
// fails an assertion on gloo's network thread, which ends the process with
// no hint of which operation it was. So every message is preceded by a
// header on a second gloo group of the same ranks: bytes, dtype and element
// count. The recv waits for the header, compares it with its own tensor and
// only then posts the payload's recv; on a mismatch it takes the payload
// into a scratch buffer (the peer's send completes, the connection stays in
// step) and throws naming both sides, as the threads backend does.
//
// Posting the payload's recv late must not make the sender wait for it: a
// program may wait for its send before it waits for its recv (each rank
// sends to the other, then receives). So the send copies its tensor, and its
// Work completes when the header is taken (the peer posted its recv, as
// gloo's own send promises); the payload goes on in the background and a
// thread (PayloadSends) waits for it, keeping the copy alive and reporting a
// failure at the next operation.
//
// The price: a second message per message, the payload's recv posted only
// once its header is in, and a copy of the tensor into fresh memory, whose
// pages cost far more than the copy (on the 2-core VM, 264 ms of CPU to
// clone 64 MB against 7 ms to copy it into memory already touched). A
// collective's pieces do not pay it: every rank runs one plan, so the
// executor checks the call once (Communicator::post_call_check) and sends
// the pieces as gloo's own messages (isend_agreed, irecv_agreed). Paying it
// (2026-11-27 to 29), the ring all-reduce lost a third to three quarters of
// its bandwidth against gloo's own (docs/benchmarks.md).
#pragma once

#include <ATen/core/Tensor.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "comm/gloo_work.hpp"

namespace distlab::comm {

// The payloads still travelling after their send's Work completed, waited
// for in order by one thread; the destructor waits for all of them.
class PayloadSends {
 public:
  explicit PayloadSends(Milliseconds timeout);
  ~PayloadSends();
  PayloadSends(const PayloadSends&) = delete;
  PayloadSends& operator=(const PayloadSends&) = delete;

  void add(GlooWorkPtr work, at::Tensor payload, std::string what, int peer);
  // Throws the first payload send that failed (once).
  void rethrow_failure();
  // Returns once every payload added so far has been taken by its receiver
  // and its copy freed.
  void drain();
  // drain() on every PayloadSends of this process: a group split off a
  // communicator has its own, and a measurement of the process's memory
  // needs all of them done.
  static void drain_all();

 private:
  struct Pending {
    GlooWorkPtr work;
    at::Tensor payload;
    std::string what;
    int peer;
  };
  void run();

  Milliseconds timeout_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<Pending> pending_;
  int in_hand_ = 0;  // taken from pending_, not yet done with
  std::exception_ptr failure_;
  bool stopping_ = false;
  std::thread thread_;
};

// What a header received from a peer (bytes, dtype, element count: three
// int64 words) means for a recv into `expected`:
//   kFits       the same bytes, dtype and count: the payload's recv is posted;
//   kMisfit     another tensor, a real one (a known dtype, a count >= 0 and
//               bytes = count x its element size, without overflow): its
//               bytes are taken into scratch, then the recv is refused;
//   kMalformed  no tensor has that header (the connection is out of step, or
//               the bytes are not DistLab's): refused at once, nothing taken.
enum class HeaderVerdict { kFits, kMisfit, kMalformed };
HeaderVerdict judge_header(const int64_t (&words)[3], const at::Tensor& expected);

// Sends `tensor` to `peer`: its header on `headers`, a copy of it on `data`.
WorkPtr send_checked(GlooGroup& headers, GlooGroup& data, PayloadSends& payloads, const at::Tensor& tensor,
                     int peer, int tag, const std::string& what, Milliseconds timeout);

// Receives into `tensor` from `peer` once the header agrees with it.
WorkPtr recv_checked(const c10::intrusive_ptr<GlooGroup>& headers, const c10::intrusive_ptr<GlooGroup>& data,
                     at::Tensor& tensor, int peer, int tag, const std::string& what, Milliseconds timeout);

}  // namespace distlab::comm
