// Lesson 01's claims, computed: the gradient accumulated over items equals
// the whole batch's gradient, and both equal the gradient of the squared
// error worked out by hand for y = x1*w1 + x2*w2 + b:
//   dL/dw1 = sum 2 (y_pred - y) x1,  dL/dw2 = sum 2 (y_pred - y) x2,  dL/db = sum 2 (y_pred - y)
#include <gtest/gtest.h>

#include <cmath>

#include "01_gradient_accumulation/house_prices.hpp"

namespace distlab::lessons {
namespace {

struct Weights {
  double w1, w2, b;
};

Gradients by_hand(const Weights& w, const std::vector<House>& items) {
  Gradients g;
  for (const House& h : items) {
    const double error = h.bedrooms * w.w1 + h.bathrooms * w.w2 + w.b - h.price;
    g.w1 += 2 * error * h.bedrooms;
    g.w2 += 2 * error * h.bathrooms;
    g.b += 2 * error;
  }
  return g;
}

void expect_near(const Gradients& got, const Gradients& want, const std::string& what) {
  const double tol = 1e-9 * (1 + std::abs(want.w1) + std::abs(want.w2) + std::abs(want.b));
  EXPECT_NEAR(got.w1, want.w1, tol) << what;
  EXPECT_NEAR(got.w2, want.w2, tol) << what;
  EXPECT_NEAR(got.b, want.b, tol) << what;
}

const std::vector<Weights> kStarts = {{0.5, 1.0, 0.2}, {0, 0, 0}, {-1.5, 3.25, 7}, {2.0, 1.5, -0.75}};

TEST(HousePrices, OneItemGradientIsTheHandDerivative) {
  const House slides_first{6, 2, 15};
  for (const Weights& w : kStarts) {
    Params p = Params::make(w.w1, w.w2, w.b);
    item_loss(p, slides_first).backward();
    expect_near(grads_of(p), by_hand(w, {slides_first}), "item (6, 2, 15)");
  }
}

TEST(HousePrices, AccumulatedGradientEqualsWholeBatchGradient) {
  const auto data = training_data();
  for (const Weights& w : kStarts) {
    for (size_t k = 1; k <= data.size(); ++k) {
      const std::vector<House> batch(data.begin(), data.begin() + k);
      Params p = Params::make(w.w1, w.w2, w.b);
      const Gradients accumulated = accumulated_gradient(p, batch);
      const Gradients whole = batch_gradient(p, batch);
      const Gradients hand = by_hand(w, batch);
      expect_near(accumulated, hand, "accumulated over " + std::to_string(k) + " items");
      expect_near(whole, hand, "one backward over " + std::to_string(k) + " items");
    }
  }
}

TEST(HousePrices, AccumulationStartsFromZeroedGradients) {
  // A stale .grad from an earlier backward must not leak into the next batch.
  const auto data = training_data();
  Params p = Params::make(0.5, 1.0, 0.2);
  item_loss(p, data[3]).backward();
  expect_near(accumulated_gradient(p, {data[0], data[1]}), by_hand({0.5, 1.0, 0.2}, {data[0], data[1]}),
              "after a stale backward");
}

TEST(HousePrices, SharesOfRanksAddUpToTheWholeBatch) {
  // Lesson 01 part 5: each rank accumulates its share; the sum is the batch's gradient.
  const auto data = training_data();
  const Weights w{0.5, 1.0, 0.2};
  for (int ranks : {1, 2, 3, 4, 8, 11}) {
    Gradients sum;
    size_t items = 0;
    for (int r = 0; r < ranks; ++r) {
      const auto share = share_of(data, r, ranks);
      items += share.size();
      Params p = Params::make(w.w1, w.w2, w.b);
      const Gradients g = accumulated_gradient(p, share);
      sum.w1 += g.w1, sum.w2 += g.w2, sum.b += g.b;
    }
    EXPECT_EQ(items, data.size()) << ranks << " ranks";
    expect_near(sum, by_hand(w, data), std::to_string(ranks) + " ranks");
  }
}

// SGD by hand: a step with the hand gradient of each group of `k` items
// (the last group may be shorter), for `epochs` passes.
Weights sgd_by_hand(Weights w, const std::vector<House>& data, int epochs, double lr, size_t k) {
  for (int e = 0; e < epochs; ++e) {
    for (size_t start = 0; start < data.size(); start += k) {
      const std::vector<House> group(data.begin() + start, data.begin() + std::min(data.size(), start + k));
      const Gradients g = by_hand(w, group);
      w = {w.w1 - lr * g.w1, w.w2 - lr * g.w2, w.b - lr * g.b};
    }
  }
  return w;
}

TEST(HousePrices, TrainingStepsEveryItemOrEveryBatchAsByHand) {
  const auto data = training_data();
  const Weights start{0.5, 1.0, 0.2};
  for (int k : {1, 2, 3, 8}) {  // 1: train_no_accumulate; 3: a short last batch; 8: full-batch descent
    Params p = Params::make(start.w1, start.w2, start.b);
    const auto losses = train(p, data, /*epochs=*/5, /*lr=*/1e-3, k);
    const Weights want = sgd_by_hand(start, data, 5, 1e-3, k);
    EXPECT_NEAR(value(p.w1), want.w1, 1e-9) << "accumulate " << k;
    EXPECT_NEAR(value(p.w2), want.w2, 1e-9) << "accumulate " << k;
    EXPECT_NEAR(value(p.b), want.b, 1e-9) << "accumulate " << k;
    ASSERT_EQ(losses.size(), 5u);
    double hand_loss = 0;
    for (const House& h : data)
      hand_loss += std::pow(h.bedrooms * want.w1 + h.bathrooms * want.w2 + want.b - h.price, 2);
    EXPECT_NEAR(losses.back(), hand_loss, 1e-9 * hand_loss) << "accumulate " << k;
    EXPECT_LT(losses.back(), losses.front()) << "accumulate " << k << ": training should lower the loss";
  }
}

TEST(HousePrices, AccumulatingTwoItemsDiffersFromTwoSteps) {
  // The slides' point: with accumulation w moves once, with the summed gradient.
  const auto data = training_data();
  const std::vector<House> two(data.begin(), data.begin() + 2);
  Params every = Params::make(0.5, 1.0, 0.2), accumulated = Params::make(0.5, 1.0, 0.2);
  train(every, two, 1, 1e-3, 1);
  train(accumulated, two, 1, 1e-3, 2);
  const Weights want = sgd_by_hand({0.5, 1.0, 0.2}, two, 1, 1e-3, 2);
  EXPECT_NEAR(value(accumulated.w1), want.w1, 1e-12);
  EXPECT_GT(std::abs(value(every.w1) - value(accumulated.w1)), 1e-6);
}

TEST(HousePrices, BadAccumulateIsRefused) {
  Params p = Params::make(0, 0, 0);
  EXPECT_THROW(train(p, training_data(), 1, 1e-3, 0), c10::Error);
}

}  // namespace
}  // namespace distlab::lessons
