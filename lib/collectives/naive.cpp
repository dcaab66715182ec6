#include "collectives/naive.hpp"

#include <ATen/ATen.h>

#include "collectives/tags.hpp"

namespace distlab::collectives::naive {

void broadcast(comm::Communicator& comm, at::Tensor& tensor, int root, int tag) {
  check_collective_tag(tag);
  if (comm.rank() == root) {
    for (int r = 0; r < comm.size(); ++r)
      if (r != root) comm.send(tensor, r, step_tag(tag, 0));
  } else {
    comm.recv(tensor, root, step_tag(tag, 0));
  }
}

void reduce(comm::Communicator& comm, at::Tensor& tensor, int root, comm::ReduceOp op, int tag) {
  check_collective_tag(tag);
  if (comm.rank() != root) {
    comm.send(tensor, root, step_tag(tag, 0));
    return;
  }
  // Start from rank 0's values, then add everybody else's in rank order.
  at::Tensor sum = root == 0 ? tensor.clone() : at::empty_like(tensor);
  if (root != 0) comm.recv(sum, 0, step_tag(tag, 0));
  at::Tensor incoming = at::empty_like(tensor);
  for (int r = 1; r < comm.size(); ++r) {
    if (r == root) {
      comm::combine_into(sum, tensor, op);
    } else {
      comm.recv(incoming, r, step_tag(tag, 0));
      comm::combine_into(sum, incoming, op);
    }
  }
  comm::finish_average(sum, op, comm.size());
  tensor.copy_(sum);
}

void all_reduce(comm::Communicator& comm, at::Tensor& tensor, comm::ReduceOp op, int tag) {
  reduce(comm, tensor, /*root=*/0, op, tag);
  broadcast(comm, tensor, /*root=*/0, tag);
}

}  // namespace distlab::collectives::naive
