#include "train/context_split.hpp"

#include "context_parallel/ring_attention.hpp"

namespace distlab::train {

at::Tensor ContextSplit::positions(int64_t local) const {
  if (!active()) return at::arange(local, at::kLong);
  return context_parallel::positions_of(layout, local * group->size(), group->size(), group->rank());
}

void split_sequences(models::TransformerLm& stage, CutLayers& cut, const ContextSplit& context) {
  stage->set_positions([context](int64_t local) { return context.positions(local); });
  // Each layer's attention core: my heads' q, k, v for my tokens, attended
  // to the whole sequence across the context group.
  const bool causal = stage->options().causal;
  for (auto& layer : cut.layers()) {
    const int64_t heads = layer->self_attn->heads();
    layer->self_attn->set_core([context, causal, heads](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      const int64_t local = q.size(1), d = q.size(2);
      // (N H, L, d) -> (N, H, L, d): heads at dimension -3 (Ulysses exchanges them).
      auto by_head = [&](const at::Tensor& x) { return x.reshape({-1, heads, local, d}); };
      const at::Tensor out = context_parallel::context_attention(*context.group, context.method, by_head(q), by_head(k),
                                                                 by_head(v), /*scale=*/1.0, context.positions(local),
                                                                 causal);  // q arrives scaled
      return out.reshape({-1, local, d});
    });
  }
}

}  // namespace distlab::train
