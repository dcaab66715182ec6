# ZeRO: the shard layout is plain data (lessons print it and the visualizer
# draws it without LibTorch); the rest moves gradients and parameters.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/shard_layout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shard_segments.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/storage.cpp
  ${CMAKE_CURRENT_LIST_DIR}/overlap.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # these reach torch::nn or torch::optim
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_factory.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sharded_optimizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/naive_zero.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero1.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero2.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero3.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory.cpp
  # Sharded checkpoints, written through lib/train's checkpoint files.
  ${CMAKE_CURRENT_LIST_DIR}/optimizer_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/sharded_checkpoint.cpp
)
