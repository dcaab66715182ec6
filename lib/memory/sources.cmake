# Memory: the process's CPU allocations, counted; activation recomputation.
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/allocator_meter.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recompute.cpp
)
