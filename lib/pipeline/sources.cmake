# Schedules, the checker, the simulator and trace measurement are plain data
# (libdistlab_base: the visualizer draws them without LibTorch); the
# executor runs tensors.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/action.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule.cpp
  ${CMAKE_CURRENT_LIST_DIR}/schedule_kinds.cpp
  ${CMAKE_CURRENT_LIST_DIR}/builders.cpp
  ${CMAKE_CURRENT_LIST_DIR}/zero_bubble.cpp
  ${CMAKE_CURRENT_LIST_DIR}/v_schedules.cpp
  ${CMAKE_CURRENT_LIST_DIR}/closed_form.cpp
  ${CMAKE_CURRENT_LIST_DIR}/replay.cpp
  ${CMAKE_CURRENT_LIST_DIR}/checker.cpp
  ${CMAKE_CURRENT_LIST_DIR}/simulator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/measure.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/executor.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gather_events.cpp
)
