list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/plan.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_rooted.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_ring.cpp
  ${CMAKE_CURRENT_LIST_DIR}/plan_halving_doubling.cpp
  ${CMAKE_CURRENT_LIST_DIR}/cost_model.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
)
