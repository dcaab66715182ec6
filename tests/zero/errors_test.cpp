// The failures ZeRO must name: ranks whose models differ, a no_sync
// gradient never reduced, parameters one flat buffer cannot hold, an
// algorithm without a reduce-scatter.
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/types.h>

#include <functional>
#include <string>

#include "comm/threads_backend.hpp"
#include "zero/naive_zero.hpp"
#include "zero/zero1.hpp"
#include "zero/zero2.hpp"
#include "zero/zero3.hpp"

namespace distlab::zero {
namespace {

using comm::Communicator;

// Runs body on `ranks` thread ranks and returns the error it raised ("" if
// none); run_thread_ranks reports any rank's failure as a CommError.
std::string error_of(int ranks, const std::function<void(Communicator&)>& body) {
  try {
    comm::run_thread_ranks(ranks, body);
  } catch (const comm::CommError& e) {
    return e.what();
  }
  return "";
}

TEST(ZeroErrors, ShapeMismatchNamesParameterAndRanks) {
  const auto factory = sgd(torch::optim::SGDOptions(0.1));
  for (const std::string who : {"naive ZeRO-1", "ZeRO-1", "ZeRO-2"}) {
    const std::string what = error_of(3, [&](Communicator& comm) {
      torch::nn::Sequential model(torch::nn::Linear(8, comm.rank() == 2 ? 31 : 32));
      if (who == "naive ZeRO-1") {
        NaiveZero1 zero(comm, *model, factory);
      } else if (who == "ZeRO-1") {
        Zero1 zero(comm, *model, factory);
      } else {
        Zero2 zero(comm, *model, factory);
      }
    });
    EXPECT_NE(what.find(": " + who + ": parameter 0 differs across ranks"), std::string::npos) << what;
    EXPECT_NE(what.find("'0.weight'"), std::string::npos) << what;
    EXPECT_NE(what.find("ranks 0, 1 agree with rank 0, ranks 2 differ"), std::string::npos) << what;
  }
}

// ZeRO-3 names the unit that holds the parameter (its units are the
// Sequential's children with parameters: "2" is unit 1).
TEST(ZeroErrors, ShapeMismatchNamesTheUnitAndTheRanks) {
  const std::string what = error_of(3, [&](Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(8, 8), torch::nn::Tanh(),
                                torch::nn::Linear(8, comm.rank() == 1 ? 5 : 4));
    Zero3 zero(comm, model, sgd(torch::optim::SGDOptions(0.1)));
  });
  EXPECT_NE(what.find("ZeRO-3: parameter 2 differs across ranks"), std::string::npos) << what;
  EXPECT_NE(what.find("'2.weight'"), std::string::npos) << what;
  EXPECT_NE(what.find("in ZeRO-3 unit 1 of 2"), std::string::npos) << what;
  EXPECT_NE(what.find("ranks 0, 2 agree with rank 0, ranks 1 differ"), std::string::npos) << what;
}

TEST(ZeroErrors, NoSyncGradientNeverReducedIsNamed) {
  const std::string what = error_of(2, [&](Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(4, 3));
    Zero2 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)));
    {
      auto guard = zero.no_sync();
      model->forward(at::ones({2, 4})).sum().backward();
    }
    zero.step();
  });
  EXPECT_NE(what.find("ZeRO-2: parameter '0.weight' still holds a gradient"), std::string::npos) << what;
  EXPECT_NE(what.find("outside no_sync()"), std::string::npos) << what;
}

TEST(ZeroErrors, ParametersOfTwoDtypesAreRefused) {
  const std::string what = error_of(2, [&](Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
    model[1]->to(at::kDouble);
    Zero1 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)));
  });
  EXPECT_NE(what.find("parameter '1.weight' is Double on cpu, but '0.weight' is Float on cpu"), std::string::npos)
      << what;
}

TEST(ZeroErrors, AlgorithmWithoutReduceScatterIsRefused) {
  const std::string what = error_of(2, [&](Communicator& comm) {
    torch::nn::Sequential model(torch::nn::Linear(4, 3));
    ZeroOptions options;
    options.algorithm = collectives::Algorithm::kHalvingDoubling;
    Zero2 zero(comm, *model, sgd(torch::optim::SGDOptions(0.1)), options);
  });
  EXPECT_NE(what.find("'halving_doubling' has no reduce-scatter"), std::string::npos) << what;
}

}  // namespace
}  // namespace distlab::zero
