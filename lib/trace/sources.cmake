list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/clock.cpp
  ${CMAKE_CURRENT_LIST_DIR}/recorder.cpp
  ${CMAKE_CURRENT_LIST_DIR}/chrome_json.cpp
  ${CMAKE_CURRENT_LIST_DIR}/live_stream.cpp
  ${CMAKE_CURRENT_LIST_DIR}/json_pull.cpp
  ${CMAKE_CURRENT_LIST_DIR}/reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/push_reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/dom_reader.cpp
  ${CMAKE_CURRENT_LIST_DIR}/config.cpp
  ${CMAKE_CURRENT_LIST_DIR}/merge.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tracks.cpp
  ${CMAKE_CURRENT_LIST_DIR}/switching_file_sink.cpp
)
