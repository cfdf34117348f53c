// The CPU math kernels, declared once per ISA variant.
//
// Every csrc/cpu/kernels/*.cpp is compiled once per entry of setup.py's ISA_VARIANTS (DEFAULT, AVX2 and
// AVX512 on x86-64, where NPU_EXT_X86_VARIANTS is defined; DEFAULT alone elsewhere, which is NEON code on
// aarch64), each time with CPU_CAPABILITY set to the variant's name and the matching -m flags, and defines
// its kernels in namespace npu_ext::cpu::<CPU_CAPABILITY>. Nothing outside those namespaces may be defined
// in a kernel source (no registration, no globals with dynamic initialisers): code compiled with -mavx512f
// must only ever run after csrc/cpu/dispatch.cpp (compiled without ISA flags) has checked the CPU.
// The op files call the dispatching wrappers of csrc/cpu/dispatch.h, never these directly.
//
// Contract shared by every kernel: 16-bit inputs are computed in fp32 and rounded once to the output dtype
// (except prelu_backward's grad_weight, whose terms are rounded to the dtype before they are summed, as on the
// NPU); reductions accumulate in fp32 (fp64 for fp64) over a partition of the problem that depends only on its
// shape, never on the thread count, and every element goes through the same vector code (partial vectors
// for tails), so results are bitwise identical for any number of threads.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>
#include <vector>

#include "common/checks.h"

namespace npu_ext {
namespace cpu {

// Row layout of grad_y for grouped_bias_add_grad: row i (0 <= i < rows[j]) of group j starts at element
// offset group_base[j] + i * row_stride of grad_y's data pointer; element h is at + h * col_stride.
struct GroupedRows {
  std::vector<int64_t> group_base;
  std::vector<int64_t> rows;
  int64_t row_stride;
  int64_t col_stride;
  int64_t hidden;
};

// The kernel signatures. Each kernel only ever sees valid, non-empty problems.
//
// gelu_backward_kernel  iter: output grad_input, inputs (grad_output, self), all of one dtype.
// logit_grad_kernel     iter: output dx, inputs (x, dy), all of one dtype.
// prelu_backward_kernel g, x, grad_input: contiguous, viewed as (outer, channels, inner); w: contiguous,
//                       `channels` elements; grad_weight: contiguous, `channels` elements. channels == 1
//                       means one scalar weight for everything. The Atlas A2/A3 kernel's formulas (see the
//                       kernel source and docs/operators.md, "Semantics notes").
// grouped_bias_add_grad_kernel  out: contiguous (G, hidden), written completely (empty groups get zeros).
// scaled_masked_softmax_backward_kernel  g, y: 4-D (B, N, S1, S2) of any strides; mask: bool, expanded to
//                       g's shape (zero strides allowed), ignored when causal is true (masked where
//                       column > row). out: contiguous, same shape and dtype as g.
//
// Forward kernels (used by the autograd wrappers):
// scaled_masked_softmax_kernel  x: 4-D (B, N, S1, S2) of any strides; mask: bool, expanded to x's shape (zero
//                       strides allowed), ignored when causal is true (masked where column > row). out:
//                       contiguous, x's shape and dtype. out = softmax((x * scale).masked_fill(mask, -10000), -1),
//                       computed in fp32 (fp64 for fp64) per row; a row whose every position is masked is 0
//                       when zero_fully_masked (a causal row never is: its diagonal is unmasked).
// grouped_bias_add_kernel  x rows described by `layout` (see GroupedRows); bias row j at bias.data +
//                       j * bias_row_stride, element h at + h * bias_col_stride. probs: undefined, or one
//                       weight per output row, contiguous, in x's compute dtype (fp32 for fp16/bf16). out:
//                       contiguous, the rows of every group in group order: out = x row + bias[group]
//                       (x row + probs[row] * bias[group]: the product rounded, then the sum, as the
//                       expression written in PyTorch).
// gelu_kernel           iter: output out, input self, of one dtype. out = gelu(self) in fp32 (fp64 for fp64).
#define NPU_EXT_DECLARE_CPU_KERNELS                                                                          \
  void gelu_backward_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate);                      \
  void logit_grad_kernel(at::TensorIteratorBase& iter, double eps);                                          \
  void prelu_backward_kernel(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w,                  \
                             const at::Tensor& grad_input, const at::Tensor& grad_weight, int64_t outer,     \
                             int64_t channels, int64_t inner);                                               \
  void grouped_bias_add_grad_kernel(const at::Tensor& grad_y, const GroupedRows& layout,                     \
                                    const at::Tensor& out);                                                  \
  void scaled_masked_softmax_backward_kernel(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask, \
                                             double scale, bool causal, const at::Tensor& out);                \
  void scaled_masked_softmax_kernel(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,   \
                                    bool zero_fully_masked, const at::Tensor& out);                          \
  void grouped_bias_add_kernel(const at::Tensor& x, const GroupedRows& layout, const at::Tensor& bias,        \
                               int64_t bias_row_stride, int64_t bias_col_stride, const at::Tensor& probs,    \
                               const at::Tensor& out);                                                       \
  void gelu_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate);

namespace DEFAULT {
NPU_EXT_DECLARE_CPU_KERNELS
}
#if defined(NPU_EXT_X86_VARIANTS)
namespace AVX2 {
NPU_EXT_DECLARE_CPU_KERNELS
}
namespace AVX512 {
NPU_EXT_DECLARE_CPU_KERNELS
}
#endif

}  // namespace cpu
}  // namespace npu_ext

