#include "collectives/executor.hpp"

#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "collectives/tags.hpp"
#include "comm/message_text.hpp"
#include "comm/peer_closed.hpp"

namespace distlab::collectives {
namespace {

bool overlaps(const Range& a, const Range& b) { return a.offset < b.offset + b.count && b.offset < a.offset + a.count; }

bool sends_from(const Step& step, int rank, const Range& range) {
  for (const Transfer& t : step.transfers)
    if (t.src == rank && overlaps(t.range, range)) return true;
  return false;
}

bool needs_scratch(const Step& step, int rank, const Transfer& t) {
  return t.reduce || sends_from(step, rank, t.range);
}

// The most elements this rank receives into scratch in any one step.
int64_t scratch_elements(const Plan& plan, int rank) {
  int64_t most = 0;
  for (const Step& step : plan.steps) {
    int64_t elements = 0;
    for (const Transfer& t : step.transfers)
      if (t.dst == rank && needs_scratch(step, rank, t)) elements += t.range.count;
    most = std::max(most, elements);
  }
  return most;
}

// Where a step's incoming pieces land before they are combined: this
// thread's buffer, kept between calls and grown to the largest asked for.
// A fresh one would cost its pages again on every call (a 32 MB buffer is
// 8192 page faults, about as long as the copy into it: the ring's time at
// 64 MB and more halved without them, docs/benchmarks-wire.md), as
// PyTorch's caching allocator keeps a freed block for the next request.
// One collective runs at a time on a thread, so no two share it. Below 1
// MiB the heap serves a buffer without new pages, and GPU tensors come
// from LibTorch's caching allocator already: neither is kept.
at::Tensor scratch_for(int64_t count, const at::Tensor& like) {
  if (!like.device().is_cpu() || count * static_cast<int64_t>(like.element_size()) < kScratchKeptFromBytes)
    return at::empty({count}, like.options());
  thread_local at::Tensor kept;
  if (!kept.defined() || kept.numel() < count || kept.scalar_type() != like.scalar_type())
    kept = at::empty({count}, like.options());  // CPU, as `like`
  return kept.narrow(0, 0, count);
}

// "3" for one chunk, "2-3" for a block, "all" for the whole buffer; a comma
// between the pieces of one step.
std::string chunks_moved(const Step& step, int rank, bool outgoing) {
  std::string text;
  for (const Transfer& t : step.transfers) {
    if ((outgoing ? t.src : t.dst) != rank) continue;
    std::string piece = t.chunk < 0     ? "all"
                        : t.chunks == 1 ? std::to_string(t.chunk)
                                        : std::to_string(t.chunk) + "-" + std::to_string(t.chunk + t.chunks - 1);
    text += (text.empty() ? "" : ",") + piece;
  }
  return text;
}

void describe_step(trace::Span& span, const Plan& plan, size_t s, int rank, int tag) {
  const Step& step = plan.steps[s];
  int64_t bytes = 0;
  for (const Transfer& t : step.transfers)
    if (t.src == rank) bytes += t.range.count * plan.elem_bytes;
  span.set_name(step.phase + " step " + std::to_string(s))
      .set_bytes(bytes)
      .arg("collective", to_string(plan.collective))
      .arg("algorithm", to_string(plan.algorithm))
      .arg("step", s)
      .arg("steps", plan.steps.size())
      .arg("phase", step.phase)
      .arg("chunk", chunks_moved(step, rank, /*outgoing=*/true))
      .arg("recv_chunk", chunks_moved(step, rank, /*outgoing=*/false))
      .arg("tag", step_tag(tag, s));
}

std::string where(const Plan& plan, size_t s, const at::Tensor& flat) {
  return std::string(to_string(plan.collective)) + " (" + to_string(plan.algorithm) + ", " +
         std::to_string(plan.count) + " " + std::string(c10::toString(flat.scalar_type())) + " elements) step " +
         std::to_string(s) + " of " + std::to_string(plan.steps.size()) + " (" + plan.steps[s].phase + ") failed. ";
}

// A piece that arrived in scratch and still has to be combined or copied in.
struct Landing {
  at::Tensor target;  // the buffer's elements it belongs to
  at::Tensor data;    // where it arrived
  bool reduce;
};

void check_fits(const comm::Communicator& comm, const Plan& plan, const at::Tensor& flat, int64_t count,
                const char* call) {
  if (plan.world_size != comm.size())
    throw comm::CommError(comm.self() + ": a plan for " + std::to_string(plan.world_size) +
                          " ranks cannot run on a communicator of " + std::to_string(comm.size()));
  if (flat.dim() != 1 || !flat.is_contiguous() || flat.numel() != count)
    throw comm::CommError(comm.self() + ": " + call + " needs a contiguous 1-D tensor of " + std::to_string(count) +
                          " elements, got " + std::to_string(flat.numel()));
}

// A call as the check of agreed messages compares it: a plan is made from
// these fields alone, so two ranks whose fields agree run the same plan, and
// every piece one sends the other receives into a buffer of its size.
at::Tensor call_of(const Plan& plan, const at::Tensor& flat) {
  return at::tensor({static_cast<int64_t>(plan.collective), static_cast<int64_t>(plan.algorithm),
                     static_cast<int64_t>(plan.world_size), static_cast<int64_t>(plan.root), plan.count,
                     static_cast<int64_t>(flat.scalar_type())},
                    at::kLong);
}

// "all_reduce ring of 10 Float elements on 3 ranks", "broadcast tree of 10
// Float elements from root 1 on 3 ranks": what a rank called, from its fields.
std::string call_text(const at::Tensor& call) {
  const int64_t* f = call.data_ptr<int64_t>();
  const auto collective = static_cast<Collective>(f[0]);
  const bool known = f[0] >= 0 && f[0] <= static_cast<int64_t>(Collective::kAllToAll) && f[1] >= 0 &&
                     f[1] <= static_cast<int64_t>(Algorithm::kNative);
  if (!known) return "an unknown collective";
  std::string text = std::string(to_string(collective)) + " " + to_string(static_cast<Algorithm>(f[1])) + " of " +
                     comm::elements_text(f[5], f[4]);
  if (collective == Collective::kBroadcast || collective == Collective::kReduce)
    text += " from root " + std::to_string(f[3]);
  return text + " on " + std::to_string(f[2]) + " ranks";
}

// Where the backend checks no piece (comm.agreed_messages_unchecked():
// gloo), the call is checked once instead. At the start each rank posts its
// call's fields to the ranks it sends pieces to, and a recv of theirs from
// the ranks it receives from; the first time a step receives from a peer,
// that peer's fields must have come and agree before its piece's recv is
// posted (verify). So a rank that called something else is refused naming
// it and both calls before any of its pieces is taken, and the check costs
// no wait of its own: pieces go out at once (no receiver takes them
// unchecked), and a peer's fields travel ahead of its first piece.
class CallCheck {
 public:
  CallCheck(comm::Communicator& comm, const Plan& plan, const at::Tensor& flat, int tag) : comm_(comm) {
    if (!comm.agreed_messages_unchecked()) return;
    const int me = comm.rank();
    std::vector<int> to;
    auto add = [](std::vector<int>& peers, int peer) {
      if (std::find(peers.begin(), peers.end(), peer) == peers.end()) peers.push_back(peer);
    };
    for (const Step& step : plan.steps)
      for (const Transfer& t : step.transfers) {
        if (t.src == me) add(to, t.dst);
        if (t.dst == me) add(from_, t.src);
      }
    mine_ = call_of(plan, flat);
    works_ = comm.post_call_check(mine_, to, from_, theirs_, call_check_tag(tag));
    verified_.assign(from_.size(), false);
  }

  // Waits for `peer`'s fields (once) and refuses them unless they are this
  // rank's.
  void verify(int peer) {
    const size_t i = static_cast<size_t>(std::find(from_.begin(), from_.end(), peer) - from_.begin());
    if (i >= from_.size() || verified_[i]) return;
    works_[i]->wait();
    verified_[i] = true;
    if (!at::equal(theirs_[i], mine_))
      throw comm::CommError(comm_.self() + ": " + call_text(mine_) + ": rank " +
                            std::to_string(comm_.world_rank_of(peer)) + " called " + call_text(theirs_[i]));
  }

  // Waits for the sends of this rank's fields, taken long before by now.
  void finish() {
    for (size_t i = from_.size(); i < works_.size(); ++i) works_[i]->wait();
  }

 private:
  comm::Communicator& comm_;
  std::vector<int> from_;
  at::Tensor mine_;
  std::vector<at::Tensor> theirs_;
  std::vector<comm::WorkPtr> works_;  // from_'s recvs, then the sends
  std::vector<bool> verified_;
};

// Runs one step inside its trace span, naming the step in any error.
template <typename Body>
void traced_step(comm::Communicator& comm, const Plan& plan, size_t s, int tag, const at::Tensor& flat, Body&& body) {
  trace::Span span(comm.recorder(), comm.world_rank(), trace::kLaneComm, "step", "step");
  if (span.active()) {
    describe_step(span, plan, s, comm.rank(), tag);
    comm.label(span);
  }
  try {
    body(step_tag(tag, s));
  } catch (const comm::PeerClosed& e) {
    // A peer that died is the cause: no hint about mismatched calls.
    comm::rethrow_with_context(where(plan, s, flat), e);
  } catch (const comm::CommError& e) {
    // The inner message names this rank and its peer already.
    comm::rethrow_with_context(where(plan, s, flat), e,
                               " (every rank must call the same collective with the same element count and dtype)");
  }
}

}  // namespace

void describe_call(trace::Span& span, const comm::Communicator& comm, const Plan& plan, const at::Tensor& flat,
                   int64_t count) {
  comm.label(span);
  // A group's collective says which group: "all_reduce ring [tensor]".
  span.set_name(std::string(to_string(plan.collective)) + " " + to_string(plan.algorithm) +
                (comm.is_world() ? std::string() : " [" + comm.group() + "]"))
      .set_bytes(static_cast<int64_t>(flat.nbytes()))
      .arg("collective", to_string(plan.collective))
      .arg("algorithm", to_string(plan.algorithm))
      .arg("count", count)
      .arg("dtype", std::string(c10::toString(flat.scalar_type())));
}

void run_plan(comm::Communicator& comm, const Plan& plan, at::Tensor& flat, comm::ReduceOp op, int tag) {
  const int me = comm.rank();
  check_fits(comm, plan, flat, plan.count, "run_plan");
  check_collective_tag(tag);

  at::Tensor scratch = scratch_for(scratch_elements(plan, me), flat);
  CallCheck call_check(comm, plan, flat, tag);

  for (size_t s = 0; s < plan.steps.size(); ++s) {
    const Step& step = plan.steps[s];
    traced_step(comm, plan, s, tag, flat, [&](int message_tag) {
      std::vector<comm::WorkPtr> pending;
      std::vector<Landing> landings;
      int64_t cursor = 0;
      for (const Transfer& t : step.transfers) {
        if (t.dst != me) continue;
        call_check.verify(t.src);
        at::Tensor target = flat.narrow(0, t.range.offset, t.range.count);
        if (needs_scratch(step, me, t)) {
          at::Tensor data = scratch.narrow(0, cursor, t.range.count);
          cursor += t.range.count;
          pending.push_back(comm.irecv_agreed(data, t.src, message_tag));
          landings.push_back({target, data, t.reduce});
        } else {
          pending.push_back(comm.irecv_agreed(target, t.src, message_tag));
        }
      }
      for (const Transfer& t : step.transfers)
        if (t.src == me)
          pending.push_back(comm.isend_agreed(flat.narrow(0, t.range.offset, t.range.count), t.dst, message_tag));
      for (auto& work : pending) work->wait();
      for (Landing& landing : landings) {
        if (landing.reduce)
          comm::combine_into(landing.target, landing.data, op);
        else
          landing.target.copy_(landing.data);
      }
    });
  }

  call_check.finish();

  const Range result = result_range(plan, me);
  if (result.count > 0) {
    at::Tensor mine = flat.narrow(0, result.offset, result.count);
    comm::finish_average(mine, op, plan.world_size);
  }
}

void run_exchange(comm::Communicator& comm, const Plan& plan, const at::Tensor& input, at::Tensor& output, int tag) {
  const int me = comm.rank();
  if (plan.collective != Collective::kAllToAll)
    throw comm::CommError(comm.self() + ": run_exchange runs all_to_all plans, not " + to_string(plan.collective));
  check_fits(comm, plan, input, plan.input_count(me), "all_to_all's input");
  check_fits(comm, plan, output, plan.output_count(me), "all_to_all's output");
  check_collective_tag(tag);
  const Range own_in = plan.input_block(me, me), own_out = plan.output_block(me, me);
  output.narrow(0, own_out.offset, own_out.count).copy_(input.narrow(0, own_in.offset, own_in.count));
  // Tagged by the distance dst - src (mod p), not by the step's index: a
  // plan built from one rank's counts (all_to_all_v) leaves out the steps
  // where that rank has nothing to move, so indices differ between ranks.
  auto tag_of = [&](const Transfer& t) { return step_tag(tag, (t.dst - t.src + plan.world_size) % plan.world_size); };
  for (size_t s = 0; s < plan.steps.size(); ++s) {
    traced_step(comm, plan, s, tag, input, [&](int) {
      std::vector<comm::WorkPtr> pending;
      for (const Transfer& t : plan.steps[s].transfers) {
        if (t.dst != me) continue;
        const Range lands = t.landing();
        at::Tensor target = output.narrow(0, lands.offset, lands.count);
        pending.push_back(comm.irecv(target, t.src, tag_of(t)));
      }
      for (const Transfer& t : plan.steps[s].transfers)
        if (t.src == me)
          pending.push_back(comm.isend(input.narrow(0, t.range.offset, t.range.count), t.dst, tag_of(t)));
      for (auto& work : pending) work->wait();
    });
  }
}

}  // namespace distlab::collectives
