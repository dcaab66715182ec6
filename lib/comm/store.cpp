#include "comm/store.hpp"

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace distlab::comm {

c10::intrusive_ptr<c10d::Store> connect_store(const WorldInfo& world, Milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(world.master_port);
  options.isServer = world.rank == 0;
  options.numWorkers = static_cast<std::size_t>(world.world_size);
  options.waitWorkers = true;  // the server returns once every rank is in
  options.timeout = timeout;
  const std::string where = world.master_addr + ":" + std::to_string(world.master_port);
  try {
    return c10::make_intrusive<c10d::TCPStore>(world.master_addr, options);
  } catch (const std::exception& e) {
    std::string why = e.what();
    why = why.substr(0, why.find('\n'));
    if (world.rank == 0)
      throw SetupError("rank 0: cannot host the rendezvous at " + where + " or not all " +
                       std::to_string(world.world_size) + " ranks joined within " + std::to_string(timeout.count()) +
                       " ms (is the port free, and did every rank start?): " + why);
    throw SetupError("rank " + std::to_string(world.rank) + ": cannot reach the master at " + where + " within " +
                     std::to_string(timeout.count()) + " ms (is rank 0 running, and are MASTER_ADDR/MASTER_PORT right?): " +
                     why);
  }
}

}  // namespace distlab::comm
