# Expert parallelism: mixture-of-experts layers whose experts live on
# different ranks. The router (softmax in float32, top-k, the balancing
# loss and the z-loss), the experts (small MLPs, stacked), the dispatch
# plan (capacity, dropped tokens, rows sorted by expert) and the layer,
# naive (every rank holds every expert) and expert parallel (all-to-all of
# the counts, all-to-all-v of the rows, the experts, all-to-all-v back);
# the auxiliary losses joined to the layer's backward (aux_loss.hpp);
# tokens per expert as trace counters (trace_counts.hpp).
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/dispatch.cpp
  ${CMAKE_CURRENT_LIST_DIR}/exchange.cpp
)
list(APPEND DISTLAB_NN_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/router.cpp
  ${CMAKE_CURRENT_LIST_DIR}/expert_mlps.cpp
  ${CMAKE_CURRENT_LIST_DIR}/moe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/aux_loss.cpp
  ${CMAKE_CURRENT_LIST_DIR}/trace_counts.cpp
)
