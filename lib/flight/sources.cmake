# The flight recorder and its analyzer: no LibTorch, so distlab-trace reads
# the files with libdistlab_base alone. Its hooks into the communicator are
# comm/flight_op.cpp.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/entry.cpp
  ${CMAKE_CURRENT_LIST_DIR}/site.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/signals.cpp
  ${CMAKE_CURRENT_LIST_DIR}/signal_pipe.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dump_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/exit_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/why.cpp
  ${CMAKE_CURRENT_LIST_DIR}/why_job.cpp
  ${CMAKE_CURRENT_LIST_DIR}/why_dead.cpp
  ${CMAKE_CURRENT_LIST_DIR}/why_collectives.cpp
  ${CMAKE_CURRENT_LIST_DIR}/why_p2p.cpp
)
