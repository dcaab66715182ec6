// Where DistLab meets the differences between LibTorch 1.13 (Debian's, CPU)
// and LibTorch 2.x (2.11: the CUDA LibTorch inside a PyTorch wheel). Each
// section is one difference: what 1.13 does, what 2.x does and since which
// version, and the one spelling DistLab uses for both, chosen at compile
// time by LibTorch's own version macros. An API that reads and behaves the
// same in both has no section here.
//
// Header-only and light: it includes no layer of lib/, and only small c10
// headers, so that any file can use it without slowing its build
// (docs/build-times.md).
#pragma once

#include <c10/core/Allocator.h>
#include <c10/core/DeviceType.h>
#include <c10/core/DispatchKey.h>
#include <c10/core/ScalarType.h>
#include <c10/macros/Export.h>
#include <torch/version.h>

#include <cstddef>
#include <sstream>
#include <stdexcept>
#include <string>

// True when the LibTorch compiled against is MAJOR.MINOR or later.
#define DISTLAB_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if DISTLAB_TORCH_AT_LEAST(2, 2)
#include <optional>
#include <variant>
#else
#include <c10/util/Optional.h>
#include <c10/util/variant.h>
#endif

// ---------------------------------------------------------------------------
// Optional values. 1.13: c10::optional is a class of its own, and LibTorch's
// functions take it (at::linear's bias, at::randn's generator). 2.2: an
// alias of std::optional, which LibTorch's functions take since; the alias
// is deprecated from 2.6 (gone under C10_NODEPRECATED).
namespace distlab::compat {
#if DISTLAB_TORCH_AT_LEAST(2, 2)
template <typename T>
using optional = std::optional<T>;
using std::nullopt;
#else
template <typename T>
using optional = c10::optional<T>;
using c10::nullopt;
#endif
}  // namespace distlab::compat

// ---------------------------------------------------------------------------
// The C++ frontend's option variants (TransformerEncoderLayerOptions::
// activation_t: kReLU, kGELU or a function). 1.13: c10::variant, read with
// c10::get_if. 2.2: std::variant; c10/util/variant.h and c10::get_if are gone.
namespace distlab::compat {
#if DISTLAB_TORCH_AT_LEAST(2, 2)
using std::get_if;
#else
using c10::get_if;
#endif
}  // namespace distlab::compat

// ---------------------------------------------------------------------------
// Autocast's switches and compute types, per device (CPU and CUDA here).
// 1.13: one function per device (is_enabled and get_autocast_gpu_dtype for
// CUDA, is_cpu_enabled and get_autocast_cpu_dtype for the CPU, their
// setters). 2.4: functions taking the device type (is_autocast_enabled,
// get_autocast_dtype, ...); the per-device ones are deprecated, warn where
// they are compiled and warn again at every call (TORCH_WARN_DEPRECATION),
// which AutocastState::current() would do at every guard. The cache and
// nesting functions (clear_cache, increment_nesting, ...) are alike in both.
//
// Declared here as <ATen/autocast_mode.h> declares them: that header brings
// ATen's NativeFunctions.h and torch/library.h into every file that
// includes this one.
namespace at::autocast {
#if DISTLAB_TORCH_AT_LEAST(2, 4)
TORCH_API bool is_autocast_enabled(c10::DeviceType device_type);
TORCH_API void set_autocast_enabled(c10::DeviceType device_type, bool enabled);
TORCH_API c10::ScalarType get_autocast_dtype(c10::DeviceType device_type);
TORCH_API void set_autocast_dtype(c10::DeviceType device_type, c10::ScalarType dtype);
#else
TORCH_API bool is_enabled();
TORCH_API void set_enabled(bool enabled);
TORCH_API bool is_cpu_enabled();
TORCH_API void set_cpu_enabled(bool enabled);
TORCH_API c10::ScalarType get_autocast_gpu_dtype();
TORCH_API c10::ScalarType get_autocast_cpu_dtype();
TORCH_API void set_autocast_gpu_dtype(c10::ScalarType dtype);
TORCH_API void set_autocast_cpu_dtype(c10::ScalarType dtype);
#endif
}  // namespace at::autocast

namespace distlab::compat {

// The devices DistLab computes on; 1.13 has no generic form to fall back to.
inline void require_autocast_device(c10::DeviceType device) {
  if (device != c10::DeviceType::CPU && device != c10::DeviceType::CUDA)
    throw std::invalid_argument(std::string("autocast: DistLab computes on the CPU or CUDA, not ") +
                                c10::DeviceTypeName(device));
}

inline bool autocast_enabled(c10::DeviceType device) {
  require_autocast_device(device);
#if DISTLAB_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void set_autocast_enabled(c10::DeviceType device, bool on) {
  require_autocast_device(device);
#if DISTLAB_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, on);
#else
  if (device == c10::DeviceType::CUDA)
    at::autocast::set_enabled(on);
  else
    at::autocast::set_cpu_enabled(on);
#endif
}

inline c10::ScalarType autocast_dtype(c10::DeviceType device) {
  require_autocast_device(device);
#if DISTLAB_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}

inline void set_autocast_dtype(c10::DeviceType device, c10::ScalarType dtype) {
  require_autocast_device(device);
#if DISTLAB_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA)
    at::autocast::set_autocast_gpu_dtype(dtype);
  else
    at::autocast::set_autocast_cpu_dtype(dtype);
#endif
}

}  // namespace distlab::compat

// ---------------------------------------------------------------------------
// An autocast dispatcher key that LibTorch itself leaves without kernels,
// for the CPU's float16 emulation (memory/fp16_emulation.hpp). Autocast's
// keys sit above autograd and start in every thread's excluded set, which
// is what the emulation needs. 1.13 has AutocastCPU, AutocastXPU and
// AutocastCUDA, and its CPU build leaves AutocastXPU free. 2.x registers
// XPU autocast in libtorch_cpu itself (autocast_mode.cpp: kernels and a
// fallthrough on AutocastXPU, as on AutocastCPU, AutocastMPS and other
// devices' keys), and has AutocastIPU, AutocastHPU, AutocastXLA and
// AutocastPrivateUse1 for backends that live outside LibTorch: the IPU's is
// the least likely to be taken. The emulation checks at run time that no
// kernel holds the key, and refuses fp16 on the CPU naming it if one does.
namespace distlab::compat {
#if DISTLAB_TORCH_AT_LEAST(2, 0)
constexpr c10::DispatchKey kUnusedAutocastKey = c10::DispatchKey::AutocastIPU;
#else
constexpr c10::DispatchKey kUnusedAutocastKey = c10::DispatchKey::AutocastXPU;
#endif
}  // namespace distlab::compat

// ---------------------------------------------------------------------------
// zero_grad of a torch::nn::Module or a torch::optim::Optimizer. 1.13:
// zeroes each .grad in place (the optimizer's takes no argument, the
// module's set_to_none defaults to false). 2.0: both take set_to_none and
// default to true: .grad becomes undefined. DistLab zeroes in place in
// both, as its tests and lessons were measured: a .grad that shares a
// bucket's memory (ddp/bucket_view.hpp) stays the bucket's, and the memory
// a step holds is the same.
namespace distlab::compat {
template <typename ModuleOrOptimizer>
void zero_grad(ModuleOrOptimizer& zeroed) {
#if DISTLAB_TORCH_AT_LEAST(2, 0)
  zeroed.zero_grad(/*set_to_none=*/false);
#else
  zeroed.zero_grad();
#endif
}
}  // namespace distlab::compat

// ---------------------------------------------------------------------------
// A c10::Allocator of DistLab's (memory/allocator_meter.cpp). 1.13:
// allocate() is const, and it is the one function an allocator must
// define. 2.3: allocate() is not const (#120969); copy_data() is pure
// virtual too in the 2.x headers (default_copy_data(), a memcpy, serves
// host memory). An allocator derived from this one defines allocate_bytes().
namespace distlab::compat {
class Allocator : public c10::Allocator {
 public:
  virtual c10::DataPtr allocate_bytes(size_t n) const = 0;
#if DISTLAB_TORCH_AT_LEAST(2, 3)
  c10::DataPtr allocate(size_t n) override { return allocate_bytes(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#else
  c10::DataPtr allocate(size_t n) const override { return allocate_bytes(n); }
#endif
};
}  // namespace distlab::compat

// ---------------------------------------------------------------------------
// The key of a parameter's entry in torch::optim::Optimizer::state(). 1.13:
// the parameter's TensorImpl address as text (std::string keys). 2.2: the
// address itself (void* keys, #108480).
namespace c10 {
struct TensorImpl;
}  // namespace c10

namespace distlab::compat {
#if DISTLAB_TORCH_AT_LEAST(2, 2)
inline void* optimizer_state_key(c10::TensorImpl* param) { return param; }
#else
inline std::string optimizer_state_key(c10::TensorImpl* param) {
  std::ostringstream out;
  out << static_cast<const void*>(param);
  return out.str();
}
#endif
}  // namespace distlab::compat
