# The models the pipeline and the capstone train: the pipelining tutorial's GPT-style
# decoder and the DDP + Pipe tutorial's Transformer LM, each buildable whole or as one
# stage of a manual split, with the whole model's parameter names.
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/split.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # these reach torch::nn or torch::optim
  ${CMAKE_CURRENT_LIST_DIR}/square_mlp.cpp
  ${CMAKE_CURRENT_LIST_DIR}/parameter_count.cpp
  ${CMAKE_CURRENT_LIST_DIR}/copy_state.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gpt.cpp
  ${CMAKE_CURRENT_LIST_DIR}/positional_encoding.cpp
  ${CMAKE_CURRENT_LIST_DIR}/transformer_lm.cpp
  ${CMAKE_CURRENT_LIST_DIR}/encoder_layer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer_stack.cpp
  ${CMAKE_CURRENT_LIST_DIR}/moe_feed_forward.cpp
)
