# Text in, token streams out. Tokenizer, vocabulary and the WikiText reader
# need no LibTorch (libdistlab_base); streams and batches are tensors.
list(APPEND DISTLAB_BASE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/utf8.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unicode_lower.cpp
  ${CMAKE_CURRENT_LIST_DIR}/unicode_lower_table.cpp
  ${CMAKE_CURRENT_LIST_DIR}/tokenizer.cpp
  ${CMAKE_CURRENT_LIST_DIR}/vocab.cpp
  ${CMAKE_CURRENT_LIST_DIR}/wikitext.cpp
)
list(APPEND DISTLAB_TORCH_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/batching.cpp
  ${CMAKE_CURRENT_LIST_DIR}/corpus.cpp
  ${CMAKE_CURRENT_LIST_DIR}/corpus_stats.cpp
)
# Programs run from the build tree read the bundled corpus of this source tree.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/corpus.cpp PROPERTIES
  COMPILE_DEFINITIONS "DISTLAB_DEFAULT_DATASET=\"${PROJECT_SOURCE_DIR}/datasets/austen\"")
