// npu_ext::grouped_bias_add_grad on CPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include "common/checks.h"
#include "cpu/dispatch.h"
#include "cpu/out_utils.h"

namespace npu_ext {
namespace {

// Validates (shapes, then every group_idx value) and returns where each group's rows live in grad_y.
cpu::GroupedRows layout_of(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                           int64_t group_idx_type, const GroupedBiasAddGradMeta& meta) {
  cpu::GroupedRows L;
  L.hidden = meta.hidden.expect_int();
  L.col_stride = grad_y.stride(-1);
  if (group_idx.has_value()) {
    const auto offsets = group_offsets("grouped_bias_add_grad", "grad_y", *group_idx, group_idx_type, grad_y.size(0));
    L.row_stride = grad_y.stride(0);
    for (int64_t j = 0; j < meta.groups.expect_int(); ++j) {
      L.group_base.push_back(offsets[j] * grad_y.stride(0));
      L.rows.push_back(offsets[j + 1] - offsets[j]);
    }
  } else {
    L.row_stride = grad_y.stride(1);
    for (int64_t j = 0; j < meta.groups.expect_int(); ++j) {
      L.group_base.push_back(j * grad_y.stride(0));
      L.rows.push_back(grad_y.size(1));
    }
  }
  return L;
}

void compute(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx, const cpu::GroupedRows& layout,
             const at::Tensor& out) {
  if (out.numel() == 0) return;
  cpu::with_contiguous_out(out, {grad_y, group_idx.value_or(at::Tensor())}, [&](const at::Tensor& dst) {
    cpu::grouped_bias_add_grad_kernel(grad_y, layout, dst);
  });
}

at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  const auto layout = layout_of(grad_y, group_idx, group_idx_type, meta);
  at::Tensor out = new_output(meta.out, grad_y);
  compute(grad_y, group_idx, layout, out);
  return out;
}

void grouped_bias_add_grad_out(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                               int64_t group_idx_type, const at::Tensor& out) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  check_out("grouped_bias_add_grad", "out", out, meta.out, grad_y);
  const auto layout = layout_of(grad_y, group_idx, group_idx_type, meta);
  compute(grad_y, group_idx, layout, out);
}

}  // namespace

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("grouped_bias_add_grad", &grouped_bias_add_grad);
  m.impl("grouped_bias_add_grad.out", &grouped_bias_add_grad_out);
}

}  // namespace npu_ext
