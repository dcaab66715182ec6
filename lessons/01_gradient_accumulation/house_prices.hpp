// The slides' house-price regression, and the two ways to train it:
//
//   price_pred = bedrooms * w1 + bathrooms * w2 + b
//   loss       = (price_pred - price)^2        one item
//   SGD        p -= lr * p.grad
//
// Lesson 01 prints what these functions compute; tests/lessons checks them
// against the gradient worked out by hand. Everything is float64 scalars so
// that "equal" can be shown to the last digit.
#pragma once

#include <torch/types.h>

#include <vector>

namespace distlab::lessons {

struct House {
  double bedrooms;   // x1
  double bathrooms;  // x2
  double price;      // y_target
};

// The slides' two items first ((6, 2) -> 15 and (5, 2) -> 12), then six more
// of the same kind, so that 1, 2, 4 or 8 ranks each get a share.
inline std::vector<House> training_data() {
  return {{6, 2, 15}, {5, 2, 12}, {3, 1, 7}, {4, 2, 11}, {2, 1, 5}, {7, 3, 18}, {3, 2, 9}, {4, 1, 9}};
}

// The items rank `rank` of `world_size` gets: rank, rank + p, rank + 2p, ...
// (as a DistributedSampler deals them out, without padding).
inline std::vector<House> share_of(const std::vector<House>& data, int rank, int world_size) {
  std::vector<House> mine;
  for (size_t i = rank; i < data.size(); i += world_size) mine.push_back(data[i]);
  return mine;
}

// The three parameters: scalar leaf tensors whose .grad() backward() adds to.
struct Params {
  torch::Tensor w1, w2, b;

  static Params make(double w1, double w2, double b) {
    auto leaf = [](double v) { return torch::tensor(v, torch::kFloat64).requires_grad_(true); };
    return {leaf(w1), leaf(w2), leaf(b)};
  }
  std::vector<torch::Tensor> all() const { return {w1, w2, b}; }
};

// dLoss/dw1, dLoss/dw2, dLoss/db as plain numbers.
struct Gradients {
  double w1 = 0, w2 = 0, b = 0;
};

inline double value(const torch::Tensor& t) { return t.item<double>(); }

// What backward() has accumulated in the parameters' .grad so far (0 before
// the first backward: LibTorch leaves .grad undefined until then).
inline Gradients grads_of(const Params& p) {
  auto g = [](const torch::Tensor& t) { return t.grad().defined() ? value(t.grad()) : 0.0; };
  return {g(p.w1), g(p.w2), g(p.b)};
}

// optimizer.zero_grad()
inline void zero_grads(Params& p) {
  for (auto& t : p.all())
    if (t.grad().defined()) t.mutable_grad().zero_();
}

// optimizer.step() for plain SGD; no_grad: the update is not part of the graph.
inline void sgd_step(Params& p, double lr) {
  at::NoGradGuard no_grad;
  for (auto& t : p.all()) t.sub_(t.grad(), lr);
}

// The forward of one item: x1*w1 + x2*w2 + b, a scalar in the graph.
inline torch::Tensor predict(const Params& p, const House& h) {
  return h.bedrooms * p.w1 + h.bathrooms * p.w2 + p.b;
}

// Its loss, (y_pred - y)^2.
inline torch::Tensor item_loss(const Params& p, const House& h) { return (predict(p, h) - h.price).pow(2); }

// One backward per item, no zero_grad in between: .grad holds the sum of the
// items' gradients. Starts from zeroed gradients and leaves them in .grad.
inline Gradients accumulated_gradient(Params& p, const std::vector<House>& items) {
  zero_grads(p);
  for (const House& h : items) item_loss(p, h).backward();
  return grads_of(p);
}

// The whole batch in one forward (x1, x2, y are (N,) tensors) and one backward
// of the summed loss. Leaves the gradient in .grad.
inline Gradients batch_gradient(Params& p, const std::vector<House>& items) {
  std::vector<double> x1, x2, y;
  for (const House& h : items) {
    x1.push_back(h.bedrooms);
    x2.push_back(h.bathrooms);
    y.push_back(h.price);
  }
  auto vec = [](const std::vector<double>& v) { return torch::tensor(v, torch::kFloat64); };
  zero_grads(p);
  auto y_pred = vec(x1) * p.w1 + vec(x2) * p.w2 + p.b;  // (N,)
  (y_pred - vec(y)).pow(2).sum().backward();
  return grads_of(p);
}

// Sum of the item losses over `data` (no graph is built).
inline double total_loss(const Params& p, const std::vector<House>& data) {
  at::NoGradGuard no_grad;
  double sum = 0;
  for (const House& h : data) sum += value(item_loss(p, h));
  return sum;
}

// The slides' training loops in one: backward on every item, step and
// zero_grad after every `accumulate` items and at the end of the data.
// accumulate = 1 is train_no_accumulate; accumulate = k is train_accumulate
// with batch_size k. Returns total_loss after each epoch.
inline std::vector<double> train(Params& p, const std::vector<House>& data, int epochs, double lr,
                                 int accumulate) {
  TORCH_CHECK(accumulate >= 1, "accumulate must be at least 1, got ", accumulate);
  std::vector<double> losses;
  zero_grads(p);
  for (int epoch = 0; epoch < epochs; ++epoch) {
    for (size_t index = 0; index < data.size(); ++index) {
      item_loss(p, data[index]).backward();
      if ((index + 1) % accumulate == 0 || index + 1 == data.size()) {
        sgd_step(p, lr);
        zero_grads(p);
      }
    }
    losses.push_back(total_loss(p, data));
  }
  return losses;
}

}  // namespace distlab::lessons
