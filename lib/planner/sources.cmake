# The planner: every layout the plan accepts for a model on N ranks, each
# one's memory per rank and step time predicted from a machine's profile,
# and the profile's calibration.
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/model_shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/enumerate.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_shape.cpp
  ${CMAKE_CURRENT_LIST_DIR}/memory_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shared_cores.cpp
  ${CMAKE_CURRENT_LIST_DIR}/step_time.cpp
  ${CMAKE_CURRENT_LIST_DIR}/calibrate.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # builds the model's pieces (torch::nn) and SGD
  ${CMAKE_CURRENT_LIST_DIR}/piece_timing.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pieces.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cut_pieces.cpp
)
# The profile's reader and writer and the scores need no LibTorch.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/profile.cpp
  ${CMAKE_CURRENT_LIST_DIR}/scores.cpp
)
