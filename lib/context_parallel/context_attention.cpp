#include "context_parallel/context_attention.hpp"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <stdexcept>

#include "context_parallel/gathered_attention.hpp"
#include "context_parallel/ring_attention.hpp"
#include "context_parallel/ulysses.hpp"

namespace distlab::context_parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The ring's forward and its own backward (ring_attention_backward) as one
// autograd function. Saved: q, k, v, the positions, out and the whole
// rows' lse (the backward recomputes each block's probabilities from them).
struct Ring : torch::autograd::Function<Ring> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            comm::Communicator* comm, double scale, const at::Tensor& positions, bool causal,
                            int64_t tag) {
    const BlockResult result = ring_attention(*comm, q, k, v, scale, positions, causal, static_cast<int>(tag));
    ctx->save_for_backward({q, k, v, positions, result.out, result.lse});
    ctx->saved_data["comm"] = reinterpret_cast<int64_t>(comm);
    ctx->saved_data["scale"] = scale;
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["tag"] = tag;
    return result.out.to(q.scalar_type());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    auto& comm = *reinterpret_cast<comm::Communicator*>(ctx->saved_data["comm"].toInt());
    const RingGradients g = ring_attention_backward(
        comm, saved[0], saved[1], saved[2], ctx->saved_data["scale"].toDouble(), saved[3],
        ctx->saved_data["causal"].toBool(), BlockResult{saved[4], saved[5]}, grads[0],
        static_cast<int>(ctx->saved_data["tag"].toInt()));
    return {g.dq.to(saved[0].scalar_type()), g.dk.to(saved[1].scalar_type()), g.dv.to(saved[2].scalar_type()),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

const char* to_string(Method method) {
  switch (method) {
    case Method::kRing: return "ring";
    case Method::kAllGather: return "all-gather";
    case Method::kNaive: return "naive";
    case Method::kUlysses: return "ulysses";
  }
  return "?";
}

std::vector<Method> all_methods() { return {Method::kRing, Method::kAllGather, Method::kNaive, Method::kUlysses}; }

Method method_from_string(const std::string& name) {
  std::string known;
  for (Method method : all_methods()) {
    if (name == to_string(method)) return method;
    known += std::string(known.empty() ? "" : ", ") + to_string(method);
  }
  throw std::invalid_argument("no context-parallel method '" + name + "' (there are: " + known + ")");
}

at::Tensor context_attention(comm::Communicator& comm, Method method, const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v, double scale, const at::Tensor& positions, bool causal, int tag) {
  switch (method) {
    case Method::kRing:
      return Ring::apply(q, k, v, &comm, scale, positions, causal, static_cast<int64_t>(tag));
    case Method::kAllGather:
      return all_gather_attention(comm, q, k, v, scale, positions, causal, tag).out.to(q.scalar_type());
    case Method::kNaive:
      return naive_attention(comm, q, k, v, scale, positions, causal, tag).out.to(q.scalar_type());
    case Method::kUlysses:
      return ulysses_attention(comm, q, k, v, scale, positions, causal, tag).out.to(q.scalar_type());
  }
  throw std::invalid_argument("context_attention: unknown method");
}

}  // namespace distlab::context_parallel
