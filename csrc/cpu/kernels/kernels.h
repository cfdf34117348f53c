// The CPU math kernels. Each is called by its op in csrc/cpu/<op>.cpp after validation and output
// allocation, and only ever sees valid, non-empty problems. Kernel sources are compiled per ISA variant
// (see setup.py), so this header must stay free of registration code.
//
// Contract shared by every kernel: 16-bit inputs are computed in fp32 and rounded once to the output dtype;
// reductions accumulate in fp32 (fp64 for fp64) over a partition of the problem that depends only on its
// shape, never on the thread count, so results are bitwise identical for any number of threads.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>
#include <vector>

#include "common/checks.h"

namespace npu_ext {
namespace cpu {

// iter: output grad_input, inputs (grad_output, self), all of one dtype.
void gelu_backward_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate);

// iter: output dx, inputs (x, dy), all of one dtype.
void logit_grad_kernel(at::TensorIteratorBase& iter, double eps);

// g, x, grad_input: contiguous, viewed as (outer, channels, inner); w: contiguous, `channels` elements;
// grad_weight: contiguous, `channels` elements. channels == 1 means one scalar weight for everything.
void prelu_backward_kernel(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& grad_input,
                           const at::Tensor& grad_weight, int64_t outer, int64_t channels, int64_t inner);

// Row layout of grad_y for grouped_bias_add_grad: row i (0 <= i < rows[j]) of group j starts at element
// offset group_base[j] + i * row_stride of grad_y's data pointer; element h is at + h * col_stride.
struct GroupedRows {
  std::vector<int64_t> group_base;
  std::vector<int64_t> rows;
  int64_t row_stride;
  int64_t col_stride;
  int64_t hidden;
};

// out: contiguous (G, hidden), written completely (empty groups get zero rows).
void grouped_bias_add_grad_kernel(const at::Tensor& grad_y, const GroupedRows& layout, const at::Tensor& out);

// g, y: 4-D (B, N, S1, S2) of any strides; mask: bool, expanded to g's shape (zero strides allowed), ignored
// when causal is true (masked where column > row). out: contiguous, same shape and dtype as g.
void scaled_masked_softmax_backward_kernel(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask,
                                           double scale, bool causal, const at::Tensor& out);

}  // namespace cpu
}  // namespace npu_ext

// ---------------------------------------------------------------------------------------------------------
// Forward kernels (used by the autograd wrappers).
namespace npu_ext {
namespace cpu {

// x: 4-D (B, N, S1, S2) of any strides; mask: bool, expanded to x's shape (zero strides allowed), ignored when
// causal is true (masked where column > row). out: contiguous, x's shape and dtype.
// out = softmax((x * scale).masked_fill(mask, -10000), -1), computed in fp32 (fp64 for fp64) per row.
void scaled_masked_softmax_kernel(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,
                                  const at::Tensor& out);

// x rows described by `layout` (see GroupedRows); bias row j at bias.data + j * bias_row_stride, element h at
// + h * bias_col_stride. out: contiguous, the rows of every group in group order: out = x row + bias[group].
void grouped_bias_add_kernel(const at::Tensor& x, const GroupedRows& layout, const at::Tensor& bias,
                             int64_t bias_row_stride, int64_t bias_col_stride, const at::Tensor& out);

}  // namespace cpu
}  // namespace npu_ext
