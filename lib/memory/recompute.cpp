// Activation recomputation (memory/recompute.hpp): the Recompute node and
// the forward that puts it in the graph.
#include "memory/recompute.hpp"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/autograd/functions/utils.h>

#include "memory/precision.hpp"

#include <atomic>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <unordered_set>
#include <utility>

namespace distlab::memory {

namespace {

using torch::autograd::Node;
using torch::autograd::variable_list;

thread_local int recomputations = 0;  // nested regions count each
std::atomic<int64_t> recomputed{0};

// recomputing() is true while one lives.
struct Recomputing {
  Recomputing() { ++recomputations, ++recomputed; }
  ~Recomputing() { --recomputations; }
  Recomputing(const Recomputing&) = delete;
  Recomputing& operator=(const Recomputing&) = delete;
};

// The generators a region draws from: the CPU's, and each GPU's its inputs
// are on, with their states.
struct Generators {
  std::vector<at::Generator> generators;
  std::vector<at::Tensor> states;

  static Generators of(const Tensors& inputs, const std::vector<at::Generator>& also) {
    Generators g;
    auto add = [&g](const at::Generator& gen) {
      bool seen = false;
      for (const at::Generator& h : g.generators) seen = seen || h == gen;
      if (!seen) g.generators.push_back(gen);
    };
    add(at::globalContext().defaultGenerator(at::Device(at::kCPU)));
    for (const at::Tensor& x : inputs)
      if (x.defined() && x.is_cuda()) add(at::globalContext().defaultGenerator(x.device()));
    for (const at::Generator& gen : also)
      if (gen.defined()) add(gen);
    for (at::Generator& gen : g.generators) {
      std::lock_guard<std::mutex> lock(gen.mutex());
      g.states.push_back(gen.get_state());
    }
    return g;
  }

  // Sets every generator to the saved state; returns what they held.
  Generators swap_in() const {
    Generators before{generators, {}};
    for (size_t i = 0; i < generators.size(); ++i) {
      at::Generator gen = generators[i];
      std::lock_guard<std::mutex> lock(gen.mutex());
      before.states.push_back(gen.get_state());
      gen.set_state(states[i]);
    }
    return before;
  }
};

// The gradient accumulators (the leaves: parameters) the graph behind
// `roots` reaches, each once, in the order met; `inputs`' own are left out.
std::vector<std::shared_ptr<Node>> leaf_accumulators(const variable_list& roots, const Tensors& inputs) {
  std::vector<std::shared_ptr<Node>> found, stack;
  std::unordered_set<Node*> seen;
  for (const at::Tensor& r : roots)
    if (r.grad_fn()) stack.push_back(r.grad_fn());
  while (!stack.empty()) {
    std::shared_ptr<Node> node = stack.back();
    stack.pop_back();
    if (!node || !seen.insert(node.get()).second) continue;
    if (auto* leaf = dynamic_cast<torch::autograd::AccumulateGrad*>(node.get())) {
      bool input = false;
      for (const at::Tensor& x : inputs) input = input || (x.defined() && leaf->variable.is_same(x));
      if (!input) found.push_back(node);
      continue;
    }
    for (const auto& edge : node->next_edges())
      if (edge.function) stack.push_back(edge.function);
  }
  return found;
}

// What the engine does with a leaf's gradient: the accumulator's pre-hooks,
// the accumulation into .grad, its post-hooks (DDP's "gradient ready"). The
// leaf's own tensor hooks (param.register_hook) run once either way: LibTorch
// 1.13 runs them inside the accumulator's apply(); 2.x runs them as the
// accumulator's tensor_pre_hooks(), which its engine also calls on a
// gradient that grad() returns for a leaf, so `grad` has been through them.
void accumulate(Node& accumulator, const at::Tensor& grad) {
  variable_list inputs{grad};
  for (const auto& hook : accumulator.pre_hooks()) inputs = (*hook)(inputs);
  variable_list outputs = accumulator(variable_list(inputs));
  for (const auto& hook : accumulator.post_hooks()) outputs = (*hook)(outputs, inputs);
}

class RecomputeNode : public Node {
 public:
  RecomputeNode(Region fn, Tensors inputs, Generators generators, AutocastState autocast)
      : fn_(std::move(fn)), inputs_(std::move(inputs)), generators_(std::move(generators)), autocast_(autocast) {}

  std::string name() const override { return "distlab::memory::Recompute"; }
  void release_variables() override { inputs_.clear(); }

  variable_list apply(variable_list&& grads) override {
    if (inputs_.empty() && num_outputs() > 0)
      throw std::runtime_error("checkpoint: backward through a recomputed region twice (its inputs are gone)");
    Tensors in;
    for (const at::Tensor& x : inputs_) {
      at::Tensor copy = x.defined() ? x.detach() : x;
      if (copy.defined() && copy.is_floating_point()) copy.requires_grad_(x.requires_grad());
      in.push_back(copy);
    }
    Tensors outputs;
    {
      // The same random draws, and the same precision (mixed precision's
      // autocast is off in the backward unless put back).
      const Generators before = generators_.swap_in();
      {
        AutocastScope precision(autocast_);
        at::AutoGradMode on(true);
        Recomputing again;
        outputs = fn_(in);
      }
      before.swap_in();
    }
    variable_list roots, seeds;
    for (size_t i = 0; i < outputs.size() && i < grads.size(); ++i)
      if (outputs[i].defined() && outputs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outputs[i]);
        seeds.push_back(grads[i]);
      }
    variable_list result(in.size());
    if (roots.empty()) return result;
    // The gradients of the region's inputs and of every other leaf its graph
    // reaches (the parameters it used), computed without accumulating any:
    // a backward() here would be a graph task of its own, and whatever a
    // parameter's hook queues for "the end of the backward" (DDP's reducer
    // does) would run at the end of this one, before the layers below have
    // their gradients.
    std::vector<std::shared_ptr<Node>> accumulators;
    variable_list wrt;
    for (const at::Tensor& x : in)
      if (x.defined() && x.requires_grad()) wrt.push_back(x);
    const size_t inputs_wanted = wrt.size();
    for (const auto& node : leaf_accumulators(roots, in)) {
      accumulators.push_back(node);
      wrt.push_back(static_cast<torch::autograd::AccumulateGrad&>(*node).variable);
    }
    const variable_list found = torch::autograd::grad(roots, wrt, seeds, /*retain_graph=*/false,
                                                      /*create_graph=*/false, /*allow_unused=*/true);
    // Each parameter's gradient goes in as the engine would hand it over:
    // through its accumulator, with that node's hooks around it.
    for (size_t j = 0; j < accumulators.size(); ++j)
      if (found[inputs_wanted + j].defined()) accumulate(*accumulators[j], found[inputs_wanted + j]);
    for (size_t i = 0, k = 0; i < in.size(); ++i)
      if (in[i].defined() && in[i].requires_grad()) result[i] = found[k++];
    return result;
  }

 private:
  Region fn_;
  Tensors inputs_;
  Generators generators_;
  AutocastState autocast_;
};

}  // namespace

bool recomputes_parameters(Recompute policy) {
  return policy == Recompute::kFull || policy == Recompute::kMatmuls;
}

const char* to_string(Recompute policy) {
  switch (policy) {
    case Recompute::kNone: return "none";
    case Recompute::kFull: return "full";
    case Recompute::kSelective: return "selective";
    case Recompute::kMatmuls: return "matmuls";
  }
  return "?";
}

Recompute recompute_from(const std::string& text) {
  for (Recompute policy : {Recompute::kNone, Recompute::kFull, Recompute::kSelective, Recompute::kMatmuls})
    if (text == to_string(policy)) return policy;
  throw std::invalid_argument("recompute: '" + text + "' is not a policy (none, full, selective, matmuls)");
}

bool recomputing() { return recomputations > 0; }

int64_t regions_recomputed() { return recomputed.load(); }

int64_t generator_state_bytes() {
  at::Generator cpu = at::globalContext().defaultGenerator(at::Device(at::kCPU));
  std::lock_guard<std::mutex> lock(cpu.mutex());
  return cpu.get_state().nbytes();
}

Tensors checkpoint(const Region& fn, const Tensors& inputs, const std::vector<at::Generator>& also) {
  if (!c10::GradMode::is_enabled()) return fn(inputs);
  Generators generators = Generators::of(inputs, also);
  Tensors outputs, detached;
  for (const at::Tensor& x : inputs) detached.push_back(x.defined() ? x.detach() : x);
  const AutocastState autocast = AutocastState::current();
  {
    at::NoGradGuard off;
    AutocastState uncached = autocast;  // a weight cast cached here would have no history
    uncached.cache = false;
    AutocastScope precision(uncached);
    outputs = fn(detached);
  }
  for (const at::Tensor& y : outputs)
    for (const at::Tensor& x : detached)
      if (y.defined() && x.defined() && y.is_same(x))
        throw std::invalid_argument("checkpoint: the region returned one of its inputs; return what it computes");
  auto node = std::shared_ptr<RecomputeNode>(new RecomputeNode(fn, inputs, std::move(generators), autocast),
                                             torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (at::Tensor& y : outputs)
    if (y.defined() && y.is_floating_point()) torch::autograd::set_history(y, node);
  return outputs;
}

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input,
                      const std::vector<at::Generator>& also) {
  return checkpoint([fn](const Tensors& in) { return Tensors{fn(in[0])}; }, Tensors{input}, also)[0];
}

}  // namespace distlab::memory
