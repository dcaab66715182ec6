# DDP: the bucket plan and the overlap arithmetic are plain data (the
# visualizer draws them without LibTorch); the rest moves gradients.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/bucket_plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/overlap.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/grad_ready_hooks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reducer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/distributed_sampler.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # these reach torch::nn or torch::optim
  ${CMAKE_CURRENT_LIST_DIR}/replicas.cpp
  ${CMAKE_CURRENT_LIST_DIR}/distributed_data_parallel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/naive_data_parallel.cpp
)
