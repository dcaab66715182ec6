#include "comm/gloo_backend.hpp"

#include "comm/gloo_communicator.hpp"

namespace distlab::comm {

std::unique_ptr<Communicator> make_gloo_communicator(const WorldInfo& world, CommOptions options) {
  return std::make_unique<GlooCommunicator>(world, std::move(options));
}

}  // namespace distlab::comm
