// The precompiled header of the test suites: LibTorch's as the library's,
// and GoogleTest, which every test file reads.
#pragma once

#include "torch.hpp"

#include <gtest/gtest.h>
