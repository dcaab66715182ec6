// distlab_test_pch's one translation unit (tests/CMakeLists.txt): CMake
// compiles the tests' precompiled header, tests.hpp, beside it.
