#include "comm/wait_for_rank.hpp"

#include <ATen/ATen.h>

#include <vector>

namespace distlab::comm {

void wait_for_rank(Communicator& comm, int root, int tag, Milliseconds limit) {
  // On nccl the message, like every tensor, lives on the rank's GPU.
  at::Tensor go = at::zeros({1}, at::TensorOptions().dtype(at::kInt).device(comm.device()));
  if (comm.rank() == root) {
    go.fill_(1);
    std::vector<WorkPtr> sends;
    for (int r = 0; r < comm.size(); ++r)
      if (r != root) sends.push_back(comm.isend(go, r, tag));
    for (auto& send : sends) send->wait();
    return;
  }
  // Posted at once and waited for without the communicator's timeout: the
  // root may be held up by a person for minutes.
  comm.irecv(go, root, tag)->wait_up_to(limit);
}

}  // namespace distlab::comm
