list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_crc32.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_files.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint.cpp
)
# The capstone's trainer (lesson 11): layout, composition, loop.
include(${CMAKE_CURRENT_LIST_DIR}/trainer_sources.cmake)
list(APPEND DISTLAB_NN_SOURCES  # these reach torch::nn or torch::optim
  ${CMAKE_CURRENT_LIST_DIR}/checkpoint_module.cpp
)
