// The CPU kernels of prelu_backward (kernel_*.cpp, one object per ISA variant: core/cpu/isa.h).
//
// prelu_backward_kernel g, x, grad_input: contiguous, viewed as (outer, channels, inner); w: contiguous,
//                       `channels` elements; grad_weight: contiguous, `channels` elements. channels == 1 means one
//                       scalar weight for everything. The Atlas A2/A3 kernel's formulas (see the kernel source and
//                       docs/operators.md, "Semantics notes"). (prelu itself is ATen's: cpu.cpp.)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>

#include "core/cpu/isa.h"
#include "ops/prelu/checks.h"

namespace npu_ext {
namespace cpu {

NPU_EXT_DECLARE_KERNEL(void prelu_backward_kernel(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,
                                             const at::Tensor& grad_input, const at::Tensor& grad_weight,
                                             int64_t outer, int64_t channels, int64_t inner))

}  // namespace cpu
}  // namespace npu_ext
