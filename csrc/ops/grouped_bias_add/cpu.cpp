// npu_ext::grouped_bias_add on CPU: validation (shapes, then every group_idx value), allocation and the fused
// kernel (csrc/cpu/kernels/grouped_bias_add.cpp): out row i of group j = x row i of group j + bias[j], or
// + probs[row] * bias[j] with probs.
//
// npu_ext::grouped_bias_add_grad on CPU.
#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include "core/cpu/out.h"
#include "core/structured.h"
#include "ops/grouped_bias_add/checks.h"
#include "ops/grouped_bias_add/kernels.h"

namespace npu_ext {
namespace grouped_bias_add_cpu {  // the family's own: the unity build (setup.py) compiles the op files as one unit

namespace forward {
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
  NPU_EXT_CPU_DISPATCH(grouped_bias_add_kernel, x, L, bias, bias.stride(0), bias.stride(-1), p, out);
  return out;
}

}  // namespace
}  // namespace forward

namespace backward {
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
    NPU_EXT_CPU_DISPATCH(grouped_bias_add_grad_kernel, grad_y, layout, dst);
  });
}

// The CPU kernel of both overloads (core/structured.h; the check and the outputs: GroupedBiasAddGradOp).
struct Kernel {
  static void run(const GroupedBiasAddGradMeta& meta, const std::array<at::Tensor, 1>& outs, const at::Tensor& grad_y,
                  const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type) {
    compute(grad_y, group_idx, layout_of(grad_y, group_idx, group_idx_type, meta), outs[0]);
  }
};

}  // namespace
}  // namespace backward

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) {
  m.impl("grouped_bias_add", &forward::grouped_bias_add);
  structured::impl<GroupedBiasAddGradOp, backward::Kernel>(m);
}

}  // namespace grouped_bias_add_cpu
}  // namespace npu_ext
