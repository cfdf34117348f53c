// Helpers shared by the device-generic composites (backward_composite.cpp, forward_composite.cpp).
#pragma once

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>

namespace npu_ext {
namespace composite {

// t in its compute dtype: fp32 for fp16/bf16 (ATen's 16-bit kernels may round intermediates, e.g. logit's
// x / (1 - x)), itself otherwise.
inline at::Tensor opmath(const at::Tensor& t) { return t.to(at::toOpMathType(t.scalar_type())); }

// The result as a contiguous tensor of `dtype`: one rounding for 16-bit inputs.
inline at::Tensor finish(const at::Tensor& r, at::ScalarType dtype) { return r.to(dtype).contiguous(); }

}  // namespace composite
}  // namespace npu_ext
