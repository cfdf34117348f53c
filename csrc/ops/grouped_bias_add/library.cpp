// The grouped_bias_add family's operators in the npu_ext library: their schemas, and the eager fast path of the forward op
// (torch_ext._C._grouped_bias_add, core/fast_path.h). Kernels register against these names per dispatch key in this folder
// (cpu.cpp, composite.cpp, npu.cpp, autograd.cpp), the Meta kernels here, from the ops' specifications (checks.h);
// the Python package adds autocast and the module API.
//
// The backward op has a functional overload and an `.out` overload with keyword-only outputs that returns ().
#include <torch/library.h>

#include "core/fast_path.h"
#include "core/structured.h"
#include "ops/grouped_bias_add/checks.h"

TORCH_LIBRARY_FRAGMENT(npu_ext, m) {
  // probs: an optional weight per row of x, out = x + probs * bias[group] (MoE).
  m.def(
      "grouped_bias_add(Tensor x, Tensor bias, Tensor? group_idx=None, int group_idx_type=0, Tensor? probs=None) "
      "-> Tensor");
  m.def("grouped_bias_add_grad(Tensor grad_y, Tensor? group_idx=None, int group_idx_type=0) -> Tensor");
  m.def(
      "grouped_bias_add_grad.out(Tensor grad_y, Tensor? group_idx=None, int group_idx_type=0, *, "
      "Tensor(a!) out) -> ()");
}

NPU_EXT_FAST_PATH("_grouped_bias_add", "npu_ext::grouped_bias_add",
                  at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, int64_t,
                             const c10::optional<at::Tensor>&))

// The Meta kernels (fake tensors, torch.compile, export): each op's check and its outputs' specs (checks.h).
NPU_EXT_META(npu_ext::GroupedBiasAddOp)
NPU_EXT_META(npu_ext::GroupedBiasAddGradOp)
