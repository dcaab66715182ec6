# Tensor and sequence parallelism (Megatron-LM): the f/g pair and its
# sequence-parallel form as autograd functions, the column- and row-parallel
# linears cut from unsplit ones, and their naive reference; the
# vocabulary-parallel embedding and cross-entropy.
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/split.cpp
  ${CMAKE_CURRENT_LIST_DIR}/regions.cpp
  ${CMAKE_CURRENT_LIST_DIR}/naive.cpp
  # Activation memory per layer and rank: the paper's, DistLab's, measured.
  ${CMAKE_CURRENT_LIST_DIR}/memory.cpp
)
list(APPEND DISTLAB_NN_SOURCES  # these reach torch::nn or torch::optim
  ${CMAKE_CURRENT_LIST_DIR}/linear.cpp
  # Megatron's Transformer layer: heads split, the MLP column- then row-parallel.
  ${CMAKE_CURRENT_LIST_DIR}/attention.cpp
  ${CMAKE_CURRENT_LIST_DIR}/layer.cpp
  # The vocabulary split: the embedding and the cross-entropy that never gathers the logits.
  ${CMAKE_CURRENT_LIST_DIR}/vocab.cpp
)
