// grouped_bias_add and grouped_bias_add_grad (and its .out overload) as compositions of ATen ops, registered on
// CompositeExplicitAutograd: what runs on any device that has no kernel of its own (CUDA, XPU, MPS, ...), so
// training through torch_ext works wherever PyTorch runs. A kernel registered on a backend key wins over it on that
// backend: CPU (cpu.cpp), Meta (library.cpp) and PrivateUse1 (npu.cpp, which calls the forward composite where aclnn's
// kernel is unavailable: torch_ext._C_npu compiles this file too, extension modules share no symbols). Autograd is
// not part of CompositeExplicitAutograd: it is on the generic Autograd key (autograd.cpp).
//
// Same contract as every other kernel (docs/operators.md): the family's checks first, 16-bit inputs computed in fp32
// and rounded once, reductions in fp32 (fp64 for fp64), contiguous outputs; the .out overload computes the whole
// result before writing, so any aliasing of inputs is fine. Reduction order is ATen's on that device. Tests call it
// on the CPU with OpOverload._op_dk("CompositeExplicitAutograd", ...).
#include "ops/grouped_bias_add/composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/composite.h"
#include "core/structured.h"
#include "ops/grouped_bias_add/checks.h"

namespace npu_ext {
namespace composite {

at::Tensor grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
  at::Tensor b;  // the bias of every row of x, in the compute dtype, broadcastable to x
  if (!group_idx.has_value()) {
    b = opmath(bias).reshape({x.size(0), 1, x.size(2)});
  } else {
    // The row -> group index is built on the host from the validated offsets (one small device-to-host copy).
    const int64_t rows = x.size(0);
    const auto offsets = group_offsets("grouped_bias_add", "x", group_idx->cpu(), group_idx_type, rows);
    at::Tensor idx = at::empty({rows}, at::TensorOptions().dtype(at::kLong));
    int64_t* p = idx.mutable_data_ptr<int64_t>();
    for (size_t j = 0; j + 1 < offsets.size(); ++j) {
      for (int64_t r = offsets[j]; r < offsets[j + 1]; ++r) p[r] = static_cast<int64_t>(j);
    }
    b = opmath(bias).index_select(0, idx.to(x.device()));
  }
  if (probs.has_value()) {
    // One weight per row: (rows...) or (rows..., 1), in x's compute dtype.
    b = b * probs->to(at::toOpMathType(x.scalar_type())).reshape(x.sizes().slice(0, x.dim() - 1).vec()).unsqueeze(-1);
  }
  return finish(at::add(opmath(x), b), x.scalar_type());
}

namespace {

// ---------------------------------------------------------------------------------------------------------
at::Tensor grouped_bias_add_grad(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                 int64_t group_idx_type) {
  const auto meta = check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  const at::Tensor gy = opmath(grad_y);
  if (!group_idx.has_value()) return finish(gy.sum(1), grad_y.scalar_type());
  // Every value is validated on a host copy (one small device-to-host copy), then each group is one sum:
  // deterministic on every device (no atomics), and an empty group is a zero row.
  const auto offsets = group_offsets("grouped_bias_add_grad", "grad_y", group_idx->cpu(), group_idx_type,
                                     grad_y.size(0));
  at::Tensor out = at::zeros({meta.groups.expect_int(), meta.hidden.expect_int()}, gy.options());
  for (size_t j = 0; j + 1 < offsets.size(); ++j) {
    const int64_t rows = offsets[j + 1] - offsets[j];
    if (rows > 0) out.select(0, static_cast<int64_t>(j)).copy_(gy.narrow(0, offsets[j], rows).sum(0));
  }
  return finish(out, grad_y.scalar_type());
}

}  // namespace
}  // namespace composite

NPU_EXT_COMPOSITE(GroupedBiasAddOp, composite::grouped_bias_add)
NPU_EXT_COMPOSITE(GroupedBiasAddGradOp, composite::grouped_bias_add_grad)  // .out: the result copied

}  // namespace npu_ext
