#include "train/batches.hpp"

#include <ATen/ATen.h>

#include "data/batching.hpp"
#include "train/pipeline_forward.hpp"

namespace distlab::train {

std::pair<at::Tensor, at::Tensor> lm_batch(const at::Tensor& source, int64_t i, int64_t bptt, const at::Device& device) {
  const data::Batch batch = data::get_batch(source, i, bptt);
  const at::Tensor input = batch.data.t().contiguous();
  return {input.to(device), batch.targets.view(input.sizes()).to(device)};
}

std::pair<at::Tensor, at::Tensor> my_rows(const ContextSplit& context, const at::Tensor& input, const at::Tensor& target) {
  if (!context.active()) return {input, target};
  const int C = context.group->size();
  const int64_t chunks = context_parallel::chunk_count(context.layout, C);
  const int64_t rows = input.size(0), padded = (rows + chunks - 1) / chunks * chunks;
  at::Tensor in = input, tg = target;
  if (padded > rows) {
    in = at::cat({input, at::zeros({padded - rows, input.size(1)}, input.options())});
    tg = at::cat({target, at::full({padded - rows, target.size(1)}, kPaddedTarget, target.options())});
  }
  const at::Tensor mine = context.positions(padded / C).to(input.device());
  return {in.index_select(0, mine), tg.index_select(0, mine)};
}

at::Tensor lm_loss(const ContextSplit& context, const at::Tensor& out, const at::Tensor& target, int64_t batch_rows) {
  const at::Tensor logits = out.reshape({-1, out.size(-1)}).to(at::kFloat), flat = target.reshape({-1});
  if (!context.active()) return at::cross_entropy_loss(logits, flat);
  const double share = double(batch_rows) * double(target.size(1)) / context.group->size();
  return at::cross_entropy_loss(logits, flat, /*weight=*/{}, at::Reduction::Sum) / share;
}

double replica_loss(const ContextSplit& context, double loss, const at::Device& device) {
  if (!context.active()) return loss;
  at::Tensor sum = at::full({1}, loss, at::kDouble).to(device);
  context.group->native_all_reduce(sum);
  return sum.cpu().item<double>() / context.group->size();
}

}  // namespace distlab::train
