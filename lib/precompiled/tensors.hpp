// The precompiled header of the library's files that use LibTorch's tensors
// but not torch::nn or torch::optim (DISTLAB_TORCH_SOURCES in the layers'
// sources.cmake): the standard library and ATen. See README.md here.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
