#include "ddp/distributed_data_parallel.hpp"

namespace distlab::ddp {

DistributedDataParallel::DistributedDataParallel(comm::Communicator& comm, std::shared_ptr<torch::nn::Module> module,
                                                 DdpOptions options)
    : comm_(comm), module_(std::move(module)), options_(options) {
  NamedTensors named;
  for (auto& item : trainable_parameters(*module_))
    if (!options_.ignored.count(item.first)) named.push_back(std::move(item));
  verify_same_parameters(comm_, named);
  std::vector<at::Tensor> params;
  for (const auto& [name, tensor] : named) {
    names_.push_back(name);
    params.push_back(tensor);
  }
  for (const auto& item : module_->named_buffers(/*recurse=*/true)) buffers_.push_back(item.value());
  broadcast_from_rank0(comm_, params);
  broadcast_from_rank0(comm_, buffers_);
  reducer_ = std::make_unique<Reducer>(comm_, std::move(params), names_, options_);
}

void DistributedDataParallel::prepare_forward() {
  if (options_.broadcast_buffers) broadcast_from_rank0(comm_, buffers_);
  reducer_->prepare_for_backward(sync_);
}

}  // namespace distlab::ddp
