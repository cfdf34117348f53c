// npu_ext::grouped_bias_add on CPU: validation (shapes, then every group_idx value), allocation and the fused
// kernel (csrc/cpu/kernels/grouped_bias_add.cpp): out row i of group j = x row i of group j + bias[j], or
// + probs[row] * bias[j] with probs.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cpu/dispatch.h"

namespace npu_ext {
namespace {

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  cpu::GroupedRows L;
  L.hidden = x.size(-1);
  L.col_stride = x.stride(-1);
  if (group_idx.has_value()) {
    const auto offsets = group_offsets("grouped_bias_add", "x", group_idx->cpu(), group_idx_type, x.size(0));
    L.row_stride = x.stride(0);
    for (size_t j = 0; j + 1 < offsets.size(); ++j) {
      L.group_base.push_back(offsets[j] * x.stride(0));
      L.rows.push_back(offsets[j + 1] - offsets[j]);
    }
  } else {
    L.row_stride = x.stride(1);
    for (int64_t j = 0; j < x.size(0); ++j) {
      L.group_base.push_back(j * x.stride(0));
      L.rows.push_back(x.size(1));
    }
  }
  at::Tensor out = at::empty(x.sizes(), x.options());
  if (out.numel() == 0) return out;
  // The row weights as the kernel reads them: contiguous, one per output row, in x's compute dtype.
  const at::Tensor p =
      probs.has_value() ? probs->reshape({-1}).to(at::toOpMathType(x.scalar_type())).contiguous() : at::Tensor();
  cpu::grouped_bias_add_kernel(x, L, bias, bias.stride(0), bias.stride(-1), p, out);
  return out;
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("grouped_bias_add", &grouped_bias_add); }

}  // namespace npu_ext
