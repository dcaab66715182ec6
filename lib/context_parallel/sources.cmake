# Context parallelism: every sequence split over ranks for the whole layer.
# First piece: attention on one block of keys with its log-sum-exp, and the
# merge of blocks (stable, and the naive form beside it).
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/block_attention.cpp
)
