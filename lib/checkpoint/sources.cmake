# Checkpoint files: atomic writes, CRC-32, the per-stage checkpointer and a
# module's named state. Below every layer that saves (zero, train).
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/crc32.cpp
  ${CMAKE_CURRENT_LIST_DIR}/files.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/checkpointer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pickle_scan.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # reaches torch::nn
  ${CMAKE_CURRENT_LIST_DIR}/module_state.cpp
)
