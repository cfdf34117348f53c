// The CPU kernels of grouped_bias_add and grouped_bias_add_grad (kernel_*.cpp, one object per ISA variant: core/cpu/isa.h).
//
// grouped_bias_add_kernel  x rows described by `layout` (see GroupedRows); bias row j at bias.data +
//                       j * bias_row_stride, element h at + h * bias_col_stride. probs: undefined, or one
//                       weight per output row, contiguous, in x's compute dtype (fp32 for fp16/bf16). out:
//                       contiguous, the rows of every group in group order: out = x row + bias[group]
//                       (x row + probs[row] * bias[group]: the product rounded, then the sum, as the
//                       expression written in PyTorch).
// grouped_bias_add_grad_kernel  out: contiguous (G, hidden), written completely (empty groups get zeros).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>
#include <vector>

#include "core/cpu/isa.h"
#include "ops/grouped_bias_add/checks.h"

namespace npu_ext {
namespace cpu {

// The rows of a grouped operand (grouped_bias_add's x, grouped_bias_add_grad's grad_y): row i (0 <= i < rows[j]) of
// group j starts at element offset group_base[j] + i * row_stride of the tensor's data pointer; element h is at
// + h * col_stride.
struct GroupedRows {
  std::vector<int64_t> group_base;
  std::vector<int64_t> rows;
  int64_t row_stride;
  int64_t col_stride;
  int64_t hidden;
};

NPU_EXT_DECLARE_KERNEL(void grouped_bias_add_kernel(const at::Tensor& x, const GroupedRows& layout,
                                               const at::Tensor& bias, int64_t bias_row_stride,
                                               int64_t bias_col_stride, const at::Tensor& probs,
                                               const at::Tensor& out))
NPU_EXT_DECLARE_KERNEL(void grouped_bias_add_grad_kernel(const at::Tensor& grad_y, const GroupedRows& layout,
                                                    const at::Tensor& out))

}  // namespace cpu
}  // namespace npu_ext
