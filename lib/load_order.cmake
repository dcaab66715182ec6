# Programs that link libdistlab name LibTorch's shared libraries themselves,
# in the order that starts them fastest (scripts/load_order.py says why and
# how: with Debian's LibTorch, about 290 libraries, the loader's symbol
# lookups at start drop from 14.9 to 6.0 million). The order is worked out
# once per build folder from a program linked as ours are, and kept in
# DISTLAB_LOAD_ORDER_LIBS;
# tests/build/load_order_check.py checks that it changes no symbol's binding.
option(DISTLAB_LOAD_ORDER "name LibTorch's libraries in the order that starts programs fastest" ON)
set(DISTLAB_LOAD_ORDER_LIBS "")   # the link items: the libraries between --no-as-needed and its end
set(DISTLAB_LOAD_ORDER_PATHS "")  # the libraries alone
set(DISTLAB_LOAD_ORDER_WHY "")    # where there is none, why (tests/build's load_order test says it)
# How a lesson names LibTorch's three libraries: first, in this order, then
# the C++ runtime its code uses (the probes here and in tests/build link so).
set(DISTLAB_LOAD_ORDER_FIRST -Wl,--push-state,--no-as-needed)
foreach(_target torch_cpu c10 torch)
  get_target_property(_file ${_target} LOCATION)
  list(APPEND DISTLAB_LOAD_ORDER_FIRST ${_file})
endforeach()
list(APPEND DISTLAB_LOAD_ORDER_FIRST -Wl,--pop-state,--as-needed)
if(NOT DISTLAB_LOAD_ORDER OR NOT CMAKE_SYSTEM_NAME STREQUAL "Linux")
  set(DISTLAB_LOAD_ORDER_WHY "DISTLAB_LOAD_ORDER is OFF or the system is not Linux")
  return()
endif()
find_package(Python3 REQUIRED COMPONENTS Interpreter)
file(SHA256 ${PROJECT_SOURCE_DIR}/scripts/load_order.py _script)
file(SHA256 ${CMAKE_CURRENT_LIST_FILE} _self)
file(SHA256 ${PROJECT_SOURCE_DIR}/tests/build/load_order_probe.cpp _probe)
set(_key "${TORCH_LIBRARIES};${TORCH_INSTALL_PREFIX};${_script};${_self};${_probe}")
if(DEFINED CACHE{DISTLAB_LOAD_ORDER_CACHED} AND "$CACHE{DISTLAB_LOAD_ORDER_KEY}" STREQUAL "${_key}")
  set(_order "$CACHE{DISTLAB_LOAD_ORDER_CACHED}")
else()
  set(_dir ${PROJECT_BINARY_DIR}/load_order)
  configure_file(${PROJECT_SOURCE_DIR}/tests/build/load_order_probe.cpp ${_dir}/probe.cpp COPYONLY)
  try_compile(_linked ${_dir}/build SOURCES ${_dir}/probe.cpp LINK_LIBRARIES ${DISTLAB_LOAD_ORDER_FIRST}
              COPY_FILE ${_dir}/probe OUTPUT_VARIABLE _why)
  if(NOT _linked)
    message(WARNING "DistLab: no load order (a program linked to LibTorch did not build):\n${_why}")
    set(DISTLAB_LOAD_ORDER_WHY "a program linked to LibTorch did not build (see the configure step's WARNING)")
    return()
  endif()
  execute_process(COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/scripts/load_order.py --program ${_dir}/probe
                  OUTPUT_VARIABLE _order RESULT_VARIABLE _rc ERROR_VARIABLE _why)
  if(NOT _rc EQUAL 0)
    message(WARNING "DistLab: no load order (scripts/load_order.py failed): ${_why}")
    set(DISTLAB_LOAD_ORDER_WHY "scripts/load_order.py failed (see the configure step's WARNING)")
    return()
  endif()
  string(STRIP "${_order}" _order)
  string(REPLACE "\n" ";" _order "${_order}")
  list(LENGTH _order _n)
  message(STATUS "DistLab: programs name LibTorch's ${_n} libraries in the order that starts them fastest")
  set(DISTLAB_LOAD_ORDER_CACHED "${_order}" CACHE INTERNAL "")
  set(DISTLAB_LOAD_ORDER_KEY "${_key}" CACHE INTERNAL "")
endif()
set(DISTLAB_LOAD_ORDER_PATHS ${_order})
# Named even where the program uses none of a library's symbols (LibTorch's
# own link options leave --as-needed on).
set(DISTLAB_LOAD_ORDER_LIBS -Wl,--push-state,--no-as-needed ${_order} -Wl,--pop-state)
