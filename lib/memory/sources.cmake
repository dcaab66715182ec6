# Measuring memory: the process's CPU allocations, counted.
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/allocator_meter.cpp
)
