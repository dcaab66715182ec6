// Activation recomputation (memory/recompute.hpp): the Recompute node and
// the forward that puts it in the graph.
#include "memory/recompute.hpp"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

namespace distlab::memory {

namespace {

using torch::autograd::Node;
using torch::autograd::variable_list;

// The generators a region draws from: the CPU's, and each GPU's its inputs
// are on, with their states.
struct Generators {
  std::vector<at::Generator> generators;
  std::vector<at::Tensor> states;

  static Generators of(const Tensors& inputs) {
    Generators g;
    g.generators.push_back(at::globalContext().defaultGenerator(at::Device(at::kCPU)));
    for (const at::Tensor& x : inputs)
      if (x.defined() && x.is_cuda()) {
        at::Generator gpu = at::globalContext().defaultGenerator(x.device());
        bool seen = false;
        for (const at::Generator& h : g.generators) seen = seen || h == gpu;
        if (!seen) g.generators.push_back(gpu);
      }
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

class Recompute : public Node {
 public:
  Recompute(Region fn, Tensors inputs, Generators generators)
      : fn_(std::move(fn)), inputs_(std::move(inputs)), generators_(std::move(generators)) {}

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
      const Generators before = generators_.swap_in();
      at::AutoGradMode on(true);
      outputs = fn_(in);
      before.swap_in();
    }
    variable_list roots, seeds;
    for (size_t i = 0; i < outputs.size() && i < grads.size(); ++i)
      if (outputs[i].defined() && outputs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outputs[i]);
        seeds.push_back(grads[i]);
      }
    if (!roots.empty()) torch::autograd::backward(roots, seeds);
    variable_list result;
    for (const at::Tensor& x : in) result.push_back(x.defined() && x.requires_grad() ? x.grad() : at::Tensor());
    return result;
  }

 private:
  Region fn_;
  Tensors inputs_;
  Generators generators_;
};

}  // namespace

Tensors checkpoint(const Region& fn, const Tensors& inputs) {
  if (!c10::GradMode::is_enabled()) return fn(inputs);
  Generators generators = Generators::of(inputs);
  Tensors outputs, detached;
  for (const at::Tensor& x : inputs) detached.push_back(x.defined() ? x.detach() : x);
  {
    at::NoGradGuard off;
    outputs = fn(detached);
  }
  for (const at::Tensor& y : outputs)
    for (const at::Tensor& x : detached)
      if (y.defined() && x.defined() && y.is_same(x))
        throw std::invalid_argument("checkpoint: the region returned one of its inputs; return what it computes");
  auto node = std::shared_ptr<Recompute>(new Recompute(fn, inputs, std::move(generators)), torch::autograd::deleteNode);
  node->set_next_edges(torch::autograd::collect_next_edges(inputs));
  for (at::Tensor& y : outputs)
    if (y.defined() && y.is_floating_point()) torch::autograd::set_history(y, node);
  return outputs;
}

at::Tensor checkpoint(const std::function<at::Tensor(const at::Tensor&)>& fn, const at::Tensor& input) {
  return checkpoint([fn](const Tensors& in) { return Tensors{fn(in[0])}; }, Tensors{input})[0];
}

}  // namespace distlab::memory
