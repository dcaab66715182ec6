// The `threads` backend: N ranks as N threads of one process.
//
// Messages are handed over in memory, rendezvous style: a send waits for the
// matching recv (as gloo and NCCL do for large messages), and whichever side
// arrives second copies the data straight from the sender's tensor into the
// receiver's, once. CPU and CUDA tensors both work (a copy between devices
// is a device copy); all ranks of one GPU share its default stream, which
// keeps each copy ordered before the kernels that follow it.
//
// Used by the tests, by lessons run with `--backend threads --ranks N`, and
// to put several ranks on one GPU (NCCL refuses two ranks per GPU).
#pragma once

#include <functional>
#include <memory>

#include "comm/communicator.hpp"

namespace distlab::comm {

class ThreadWorld;

// The shared state of one job of N thread ranks.
std::shared_ptr<ThreadWorld> make_thread_world(int world_size, CommOptions options = {});
// The communicator of `rank` in `world` (call once per rank).
std::unique_ptr<Communicator> make_thread_communicator(const std::shared_ptr<ThreadWorld>& world, int rank);
// Fails every pending and future wait in the world with `reason`: a rank
// that threw must not leave the others waiting for it.
void abort_thread_world(ThreadWorld& world, const std::string& reason);

// Runs body(comm) on `world_size` threads, one per rank, and joins them. If
// a rank throws, the others are woken with an error naming it, and the
// first failure is rethrown as CommError("rank R failed: ...").
void run_thread_ranks(int world_size, const std::function<void(Communicator&)>& body, CommOptions options = {});

}  // namespace distlab::comm
