#include "zero/storage.hpp"

#include <c10/core/StorageImpl.h>

#include <stdexcept>
#include <string>

namespace distlab::zero {

int64_t storage_bytes(const at::Tensor& t) { return static_cast<int64_t>(t.storage().nbytes()); }

void release_storage(const at::Tensor& t) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(c10::DataPtr(nullptr, t.device()));  // the old DataPtr frees its bytes
  storage->set_nbytes(0);
}

void reallocate_storage(const at::Tensor& t, int64_t bytes) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  if (storage->nbytes() != 0)
    throw std::logic_error("reallocate_storage: the storage still holds " + std::to_string(storage->nbytes()) +
                           " bytes");
  if (storage->allocator() == nullptr) throw std::logic_error("reallocate_storage: the storage has no allocator");
  storage->set_data_ptr_noswap(storage->allocator()->allocate(static_cast<size_t>(bytes)));
  storage->set_nbytes(static_cast<size_t>(bytes));
}

}  // namespace distlab::zero
