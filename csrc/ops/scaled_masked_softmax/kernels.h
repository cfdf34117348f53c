// The CPU kernels of scaled_masked_softmax and scaled_masked_softmax_backward (kernel_*.cpp, one object per ISA variant: core/cpu/isa.h).
//
// scaled_masked_softmax_kernel  x: 4-D (B, N, S1, S2) of any strides; mask: bool, expanded to x's shape (zero
//                       strides allowed), ignored when causal is true (masked where column > row). out:
//                       contiguous, x's shape and dtype. out = softmax((x * scale).masked_fill(mask, -10000), -1),
//                       computed in fp32 (fp64 for fp64) per row; a row whose every position is masked is 0
//                       when zero_fully_masked (a causal row never is: its diagonal is unmasked).
// scaled_masked_softmax_backward_kernel  g, y: 4-D (B, N, S1, S2) of any strides; mask: bool, expanded to
//                       g's shape (zero strides allowed), ignored when causal is true (masked where
//                       column > row). out: contiguous, same shape and dtype as g.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>

#include "core/cpu/isa.h"
#include "ops/scaled_masked_softmax/checks.h"

namespace npu_ext {
namespace cpu {

NPU_EXT_DECLARE_KERNEL(void scaled_masked_softmax_kernel(const at::Tensor& x, const at::Tensor& mask, double scale,
                                                    bool causal, bool zero_fully_masked, const at::Tensor& out))
NPU_EXT_DECLARE_KERNEL(void scaled_masked_softmax_backward_kernel(const at::Tensor& g, const at::Tensor& y,
                                                             const at::Tensor& mask, double scale, bool causal,
                                                             const at::Tensor& out))

}  // namespace cpu
}  // namespace npu_ext
