# Plans and the cost model are plain data (libdistlab_base: the visualizer
# and the launcher use them without LibTorch); running them needs tensors.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_rooted.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_ring.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_halving_doubling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_all_to_all.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_text.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cost_model.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/executor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/collectives.cpp
  ${CMAKE_CURRENT_LIST_DIR}/all_to_all.cpp
  ${CMAKE_CURRENT_LIST_DIR}/naive.cpp
  ${CMAKE_CURRENT_LIST_DIR}/calibrate.cpp
  ${CMAKE_CURRENT_LIST_DIR}/async.cpp
  ${CMAKE_CURRENT_LIST_DIR}/grad_norm.cpp
)
