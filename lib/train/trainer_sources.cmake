list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/training_log.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/layout.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dimensions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/elastic.cpp
  ${CMAKE_CURRENT_LIST_DIR}/pipeline_forward.cpp
  ${CMAKE_CURRENT_LIST_DIR}/model_digest.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer_state.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # these reach torch::nn or torch::optim
  ${CMAKE_CURRENT_LIST_DIR}/data_parallel.cpp
  ${CMAKE_CURRENT_LIST_DIR}/stage_model.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cut_layers.cpp
  ${CMAKE_CURRENT_LIST_DIR}/context_split.cpp
  ${CMAKE_CURRENT_LIST_DIR}/rank_build.cpp
  ${CMAKE_CURRENT_LIST_DIR}/batches.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer_step.cpp
  ${CMAKE_CURRENT_LIST_DIR}/evaluation.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer_checkpoints.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trainer.cpp
)
