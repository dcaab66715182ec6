list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/env.cpp
  ${CMAKE_CURRENT_LIST_DIR}/error_file.cpp
  ${CMAKE_CURRENT_LIST_DIR}/host_identity.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shm_segment.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/reduce_op.cpp
  ${CMAKE_CURRENT_LIST_DIR}/communicator.cpp
  ${CMAKE_CURRENT_LIST_DIR}/flight_op.cpp
  ${CMAKE_CURRENT_LIST_DIR}/backward_thread.cpp
  ${CMAKE_CURRENT_LIST_DIR}/threads_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/store.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gloo_work.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gloo_p2p.cpp
  ${CMAKE_CURRENT_LIST_DIR}/gloo_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shm_process.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shm_links.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shm_arena.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shm_direct.cpp
  ${CMAKE_CURRENT_LIST_DIR}/same_host_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/nccl_backend.cpp
  ${CMAKE_CURRENT_LIST_DIR}/job.cpp
  ${CMAKE_CURRENT_LIST_DIR}/intra_op_threads.cpp
  ${CMAKE_CURRENT_LIST_DIR}/clock_sync.cpp
  ${CMAKE_CURRENT_LIST_DIR}/wait_for_rank.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shaped_p2p.cpp
)
