#include "pipeline/executor.hpp"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/autograd.h>

#include <utility>

#include "comm/shaped_p2p.hpp"
#include "flight/site.hpp"
#include "pipeline/checker.hpp"
#include "pipeline/simulator.hpp"

namespace distlab::pipeline {

namespace {

// "rank 3 (stage1 rank 1)" in a group, "rank 3" in the world: the job-wide
// rank first, as Communicator::self() names this rank.
std::string peer_name(const comm::Communicator& comm, int peer) {
  std::string text = "rank " + std::to_string(comm.world_rank_of(peer));
  if (!comm.is_world()) text += " (" + comm.group() + " rank " + std::to_string(peer) + ")";
  return text;
}

constexpr int kMaxTag = 1 << 20;  // the user's tag range (collectives/tags.hpp)
enum Channel { kHeader = 0, kActivation = 1, kGradient = 2 };

}  // namespace

// Everything one step keeps per (local stage c, microbatch i).
struct PipelineExecutor::State {
  std::vector<std::vector<at::Tensor>> input, output, root, grad_output, grad_input;
  std::vector<std::pair<comm::WorkPtr, std::vector<at::Tensor>>> sends;  // waited at the end of the step
  std::vector<std::string> send_names;
  // Where each (c, i)'s activation sends are in `sends`: its gradient's
  // arrival proves them delivered, so they are waited and their tensors
  // dropped then (a sent activation is not kept to the step's end).
  std::vector<std::vector<std::vector<size_t>>> activation_sends;
  State(int v, int m)
      : input(v, std::vector<at::Tensor>(m)), output(input), root(input), grad_output(input), grad_input(input),
        activation_sends(v, std::vector<std::vector<size_t>>(m)) {}
};

PipelineExecutor::PipelineExecutor(comm::Communicator& comm, Schedule schedule, std::vector<StageModule> stages,
                                   ExecutorOptions options)
    : comm_(comm), schedule_(std::move(schedule)), stages_(std::move(stages)), options_(std::move(options)) {
  const std::string who = comm.self() + ": " + schedule_.describe() + ": ";
  if (schedule_.ranks != comm.size())
    throw ScheduleError(who + "built for " + std::to_string(schedule_.ranks) + " ranks but the communicator has " +
                        std::to_string(comm.size()) + "; build it with make_schedule(kind, comm.size(), m, v)");
  if (static_cast<int>(stages_.size()) != schedule_.stages_per_rank)
    throw ScheduleError(who + "expects " + std::to_string(schedule_.stages_per_rank) + " stage module(s) on this rank, got " +
                        std::to_string(stages_.size()));
  if (!options_.loss) throw ScheduleError(who + "no loss function given (ExecutorOptions::loss)");
  const int64_t top = options_.tag_base + 3LL * schedule_.num_stages() * schedule_.microbatches;
  if (options_.tag_base < 0 || top > kMaxTag)
    throw ScheduleError(who + "message tags would reach " + std::to_string(top) + ", past 2^20; use a smaller tag_base or fewer microbatches");
  validate(schedule_);
}

PipelineExecutor::~PipelineExecutor() = default;

StepResult PipelineExecutor::step(const at::Tensor& input, const at::Tensor& target) {
  const Schedule& sch = schedule_;
  const int m = sch.microbatches, S = sch.num_stages(), me = comm_.rank();
  const bool has_first = sch.rank_of_stage(0) == me, has_last = sch.rank_of_stage(S - 1) == me;
  const int64_t target_dim = options_.target_split_dim >= 0 ? options_.target_split_dim : options_.split_dim;
  auto split = [&](const at::Tensor& t, int64_t dim, const char* what) {
    if (!t.defined() || t.dim() <= dim || t.size(dim) < m)
      throw ScheduleError(comm_.self() + ": cannot cut the " + what + " into " + std::to_string(m) +
                          " microbatches along dim " + std::to_string(dim) +
                          (t.defined() ? " of shape " + std::string(c10::str(t.sizes())) : " (undefined)") +
                          "; give a larger batch or fewer microbatches");
    return t.tensor_split(m, dim);
  };
  const std::vector<at::Tensor> inputs = has_first ? split(input, options_.split_dim, "input") : std::vector<at::Tensor>{};
  const std::vector<at::Tensor> targets = has_last ? split(target, target_dim, "target") : std::vector<at::Tensor>{};

  State st(sch.stages_per_rank, m);
  StepResult result;
  result.has_loss = has_last;
  if (has_last) result.microbatch_losses.assign(m, 0.0);
  auto tag = [&](Channel ch, int sending_stage, int mb) { return options_.tag_base + (ch * S + sending_stage) * m + mb; };
  const std::string step_text = std::to_string(options_.step);
  // Weight-gradient actions per local stage, to tell before_backward which
  // is the last: B and W, or B alone where the stage does not split its backward.
  auto computes_weights = [&](const Action& a) {
    const bool splits = stages_[sch.local_index(a.stage)].splits_backward;
    return a.type == ActionType::kBackward || (a.type == ActionType::kBackwardWeight && splits) ||
           (a.type == ActionType::kBackwardInput && !splits);
  };
  std::vector<int> weight_actions(sch.stages_per_rank, 0), weight_done(sch.stages_per_rank, 0);
  for (const Action& action : sch.programs[me])
    for (const Action& a : parts(action))
      if (computes_weights(a)) ++weight_actions[sch.local_index(a.stage)];

  // One simple action (F, B, I, W, or a message) of this rank's program.
  auto run = [&](const Action& a) {
    const int s = a.stage, c = sch.local_index(s), i = a.microbatch;
    const bool prev_local = s > 0 && sch.rank_of_stage(s - 1) == me;
    int peer = -1;
    if (a.type == ActionType::kSendF || a.type == ActionType::kRecvB) peer = sch.rank_of_stage(s + 1);
    if (a.type == ActionType::kSendB || a.type == ActionType::kRecvF) peer = sch.rank_of_stage(s - 1);
    // Traces speak world ranks: in a group (a pipeline of a larger job) the
    // group's name and rank go into the args.
    trace::Span span(comm_.recorder(), comm_.world_rank(), stage_lane(s).c_str(), to_string(a).c_str(),
                     action_category(a.type));
    span.arg("microbatch", i).arg("stage", s).arg("schedule", kind_name(sch.kind)).arg("step", step_text);
    if (span.active()) comm_.label(span);
    if (peer >= 0) span.set_peer(comm_.world_rank_of(peer));
    // The flight recorder names the action behind each message.
    flight::Site site("pipeline " + to_string(a) + " (stage " + std::to_string(s) + ", microbatch " +
                      std::to_string(i) + ", step " + step_text + ")");
    // The output of this (c, i) as autograd sees it: the scaled loss on the
    // last stage, the activation elsewhere; and the gradient to start from.
    auto root = [&]() { return s == S - 1 ? st.root[c][i] : st.output[c][i]; };
    auto seed = [&]() { return s == S - 1 ? std::vector<at::Tensor>{} : std::vector<at::Tensor>{st.grad_output[c][i]}; };
    // The gradient of this stage's input goes to the previous stage.
    auto hand_back = [&](const at::Tensor& grad) {
      if (prev_local)
        st.grad_output[sch.local_index(s - 1)][i] = grad;
      else
        st.grad_input[c][i] = grad;
    };
    if (options_.before_backward && computes_weights(a))
      options_.before_backward(s, i, ++weight_done[c] == weight_actions[c]);
    try {
      switch (a.type) {
        case ActionType::kForward: {
          at::Tensor x = s == 0 ? inputs[i] : st.input[c][i];
          if (s > 0 && at::isFloatingType(x.scalar_type())) x = x.detach().requires_grad_(true);
          st.input[c][i] = x;
          at::Tensor out = stages_[c].forward(x);
          if (s == S - 1) {
            const at::Tensor loss = options_.loss(out, targets[i]);
            result.microbatch_losses[i] = loss.item<double>();
            // This microbatch's share of the batch: sum over i of n_i/N * loss_i is the batch's mean loss.
            const double weight = double(targets[i].size(target_dim)) / double(target.size(target_dim));
            st.root[c][i] = loss * (weight * options_.gradient_scale);
            result.loss += result.microbatch_losses[i] * weight;
          } else {
            st.output[c][i] = out;
            // The next stage on this rank (p = 1, or the turn of a V) takes it in memory.
            if (sch.rank_of_stage(s + 1) == me) st.input[sch.local_index(s + 1)][i] = out.detach();
          }
          break;
        }
        case ActionType::kBackwardInput:  // the input's gradient only; the graph stays for W
          if (stages_[c].splits_backward) {
            if (s > 0) hand_back(torch::autograd::grad({root()}, {st.input[c][i]}, seed(), /*retain_graph=*/true)[0]);
            break;
          }
          [[fallthrough]];  // its parameters' gradients come with the input's (a recomputed layer): all of B now
        case ActionType::kBackward:
          torch::autograd::backward({root()}, seed());
          if (s > 0) hand_back(st.input[c][i].grad());
          st.input[c][i] = st.output[c][i] = st.root[c][i] = st.grad_output[c][i] = at::Tensor();
          break;
        case ActionType::kBackwardWeight:  // the parameters' gradients, into .grad
          if (stages_[c].splits_backward && !stages_[c].parameters.empty())
            torch::autograd::backward({root()}, seed(), /*retain_graph=*/false, /*create_graph=*/false,
                                      stages_[c].parameters);
          // That backward walks again every node between the root and the
          // parameters (it kept no gradient of I's): W costs about the whole
          // backward, I + W more than B (the planner's step_time.cpp counts
          // it so). The zero-bubble paper's W is only the weight products,
          // from the output gradients I would keep.
          st.input[c][i] = st.output[c][i] = st.root[c][i] = st.grad_output[c][i] = at::Tensor();
          break;
        case ActionType::kSendF: {
          const at::Tensor data = st.output[c][i].detach().contiguous();
          at::Tensor header = comm::shape_header(data, comm_.device(), comm_.self() + " " + to_string(a));
          st.activation_sends[c][i] = {st.sends.size(), st.sends.size() + 1};
          st.sends.push_back({comm_.isend(header, peer, tag(kHeader, s, i)), {header}});
          st.sends.push_back({comm_.isend(data, peer, tag(kActivation, s, i)), {data}});
          st.send_names.insert(st.send_names.end(), 2, to_string(a));
          span.set_bytes(data.numel() * static_cast<int64_t>(data.element_size()));
          break;
        }
        case ActionType::kRecvF: {
          at::Tensor header = comm::empty_shape_header(comm_.device());
          comm_.irecv(header, peer, tag(kHeader, s - 1, i))->wait();
          at::Tensor data = comm::empty_from_shape_header(header, comm_.device());
          comm_.irecv(data, peer, tag(kActivation, s - 1, i))->wait();
          st.input[c][i] = data;
          span.set_bytes(data.numel() * static_cast<int64_t>(data.element_size()));
          break;
        }
        case ActionType::kSendB: {
          const at::Tensor grad = st.grad_input[c][i].contiguous();
          st.sends.push_back({comm_.isend(grad, peer, tag(kGradient, s, i)), {grad}});
          st.send_names.push_back(to_string(a));
          st.grad_input[c][i] = at::Tensor();
          break;
        }
        case ActionType::kRecvB: {
          at::Tensor grad = at::empty_like(st.output[c][i], at::MemoryFormat::Contiguous);
          comm_.irecv(grad, peer, tag(kGradient, s + 1, i))->wait();
          st.grad_output[c][i] = grad;
          for (size_t k : st.activation_sends[c][i]) {
            st.sends[k].first->wait();
            st.sends[k] = {nullptr, {}};
          }
          break;
        }
        case ActionType::kOverlapFB: break;  // never here: run() gets its halves
      }
    } catch (const comm::CommError& e) {
      comm::rethrow_with_context(comm_.self() + ", pipeline action " + to_string(a) + " (" + sch.describe() +
                                     (peer >= 0 ? ", peer " + peer_name(comm_, peer) : std::string()) + "): ",
                                 e);
    }
  };
  for (const Action& a : sch.programs[me]) {
    // OVERLAP_F_B (DualPipeV): on a GPU its forward and backward would run on
    // two streams so that each hides the other's communication. Here they
    // run one after the other inside the action, forward first, each traced
    // on its own: ranks on CPU cores that the halves would share cannot hide
    // compute behind compute (docs/benchmarks-pipeline.md measures it).
    for (const Action& part : parts(a)) run(part);
  }
  // Sends were posted without waiting (schedule.hpp); they must be done
  // before their tensors are freed and before the next step reuses the tags
  // (an activation's, when its gradient came back; the rest here).
  for (size_t k = 0; k < st.sends.size(); ++k) {
    if (!st.sends[k].first) continue;  // waited when its gradient came back
    try {
      st.sends[k].first->wait();
    } catch (const comm::CommError& e) {
      comm::rethrow_with_context(comm_.self() + ", pipeline action " + st.send_names[k] +
                                     " (waiting at the end of the step): ",
                                 e);
    }
  }
  ++options_.step;
  return result;
}

}  // namespace distlab::pipeline
