# Runs inside ctest, before the tests: registers one ctest test per
# GoogleTest suite of one executable, named EXECUTABLE:SUITE and run as
# `EXECUTABLE --gtest_filter=SUITE.*`. One process per suite, not per case:
# each process linked to LibTorch spends most of a second loading it and
# registering its operators, which was a third of the suite's time when
# every case had its own process.
#
# Set before including: DISTLAB_TEST_NAME (the executable's target name),
# DISTLAB_TEST_EXE (its file), DISTLAB_TEST_DIR (where its tests run),
# DISTLAB_TEST_TIMEOUT (seconds per suite), DISTLAB_TEST_ONE (true: one
# ctest test, named EXECUTABLE, runs every suite in one process). The
# listing is cached next to the executable and redone when it is newer.
set(_listed "${DISTLAB_TEST_DIR}/${DISTLAB_TEST_NAME}_suites.cmake")
if(NOT EXISTS "${DISTLAB_TEST_EXE}")
  add_test(${DISTLAB_TEST_NAME}_NOT_BUILT ${DISTLAB_TEST_NAME}_NOT_BUILT)
  return()
endif()
if(DISTLAB_TEST_ONE)
  add_test("${DISTLAB_TEST_NAME}" "${DISTLAB_TEST_EXE}")
  set_tests_properties("${DISTLAB_TEST_NAME}" PROPERTIES WORKING_DIRECTORY "${DISTLAB_TEST_DIR}"
                       TIMEOUT ${DISTLAB_TEST_TIMEOUT} LABELS gtest)
  return()
endif()
if(NOT EXISTS "${_listed}" OR NOT "${_listed}" IS_NEWER_THAN "${DISTLAB_TEST_EXE}"
   OR NOT "${_listed}" IS_NEWER_THAN "${CMAKE_CURRENT_LIST_FILE}")
  execute_process(COMMAND "${DISTLAB_TEST_EXE}" --gtest_list_tests WORKING_DIRECTORY "${DISTLAB_TEST_DIR}"
                  TIMEOUT 60 OUTPUT_VARIABLE _listing ERROR_VARIABLE _errors RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    # Not cached: the next ctest lists again.
    add_test(${DISTLAB_TEST_NAME}_CANNOT_LIST ${DISTLAB_TEST_EXE} --gtest_list_tests)
    message(WARNING "${DISTLAB_TEST_EXE} --gtest_list_tests failed (${_rc}): ${_errors}")
    return()
  endif()
  # Suite lines start in column 0 and end with '.' (then, for typed and
  # parametrized suites, a comment); case lines are indented.
  string(REPLACE ";" "," _listing "${_listing}")
  string(REPLACE "\n" ";" _lines "${_listing}")
  set(_content "")
  foreach(_line IN LISTS _lines)
    if(_line MATCHES "^([^ #]+)\\.( .*)?$")
      set(_test "${DISTLAB_TEST_NAME}:${CMAKE_MATCH_1}")
      string(APPEND _content
        "add_test([==[${_test}]==] [==[${DISTLAB_TEST_EXE}]==] [==[--gtest_filter=${CMAKE_MATCH_1}.*]==])\n"
        "set_tests_properties([==[${_test}]==] PROPERTIES WORKING_DIRECTORY [==[${DISTLAB_TEST_DIR}]==]"
        " TIMEOUT ${DISTLAB_TEST_TIMEOUT} LABELS gtest)\n")
    endif()
  endforeach()
  file(WRITE "${_listed}" "${_content}")
endif()
include("${_listed}")
