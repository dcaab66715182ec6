# Context parallelism: every sequence split over ranks for the whole layer.
# Attention on one block of keys with its log-sum-exp, and the merge of
# blocks (stable, and the naive form beside it).
# Which blocks each rank computes at each ring step, as plain data.
list(APPEND DISTLAB_BASE_SOURCES ${CMAKE_CURRENT_LIST_DIR}/ring_plan.cpp)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/block_attention.cpp
  # The ring: K and V blocks round the ring, the next transfer overlapping this block's compute.
  ${CMAKE_CURRENT_LIST_DIR}/ring_attention.cpp
  # K/V gathered once (PyTorch's default, Llama 3's), and the naive gather-everything version.
  ${CMAKE_CURRENT_LIST_DIR}/gathered_attention.cpp
  # Ulysses: an all-to-all from sequence shards to head shards and back.
  ${CMAKE_CURRENT_LIST_DIR}/ulysses.cpp
  # Any of them as one differentiable call: what a model's attention runs under --context C.
  ${CMAKE_CURRENT_LIST_DIR}/context_attention.cpp
)
