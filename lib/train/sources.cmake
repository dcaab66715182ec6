# The capstone's trainer (lesson 11): layout, composition, loop.
include(${CMAKE_CURRENT_LIST_DIR}/trainer_sources.cmake)
