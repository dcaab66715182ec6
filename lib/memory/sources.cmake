# Memory and compute: the process's CPU allocations, counted, and freed ones
# kept for reuse (host_allocator.hpp), its peak resident memory (resident.hpp); activation recomputation; mixed
# precision and the loss scaler; FLOP counts and the matmul peak (MFU).
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/allocator_meter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_allocator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/resident.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recompute.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flops.cpp
  ${CMAKE_CURRENT_LIST_DIR}/precision.cpp
  ${CMAKE_CURRENT_LIST_DIR}/fp16_emulation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/loss_scaler.cpp
  ${CMAKE_CURRENT_LIST_DIR}/products.cpp
)
