// The scaled_masked_softmax family's operators in the npu_ext library: their schemas, and the eager fast path of the forward op
// (torch_ext._C._scaled_masked_softmax, core/fast_path.h). Kernels register against these names per dispatch key in this folder
// (cpu.cpp, composite.cpp, npu.cpp, autograd.cpp), the Meta kernels here, from the ops' specifications (checks.h);
// the Python package adds autocast and the module API.
//
// The backward op has a functional overload and an `.out` overload with keyword-only outputs that returns ().
#include <torch/library.h>

#include "core/fast_path.h"
#include "core/structured.h"
#include "ops/scaled_masked_softmax/checks.h"

TORCH_LIBRARY_FRAGMENT(npu_ext, m) {
  // fully_masked: "uniform" (softmax of the -10000 fill) or "zero" (Megatron's fused kernel) for a row whose
  // every position is masked.
  m.def(
      "scaled_masked_softmax(Tensor x, Tensor mask, float scale=1.0, bool fix_triu_mask=False, "
      "str fully_masked=\"uniform\") -> Tensor");
  m.def(
      "scaled_masked_softmax_backward(Tensor grad_output, Tensor y, Tensor mask, float scale=1.0, "
      "bool fix_triu_mask=False) -> Tensor");
  m.def(
      "scaled_masked_softmax_backward.out(Tensor grad_output, Tensor y, Tensor mask, float scale=1.0, "
      "bool fix_triu_mask=False, *, Tensor(a!) out) -> ()");
}

NPU_EXT_FAST_PATH("_scaled_masked_softmax", "npu_ext::scaled_masked_softmax",
                  at::Tensor(const at::Tensor&, const at::Tensor&, double, bool, c10::string_view))

// The Meta kernels (fake tensors, torch.compile, export): each op's check and its outputs' specs (checks.h).
NPU_EXT_META(npu_ext::ScaledMaskedSoftmaxOp)
NPU_EXT_META(npu_ext::ScaledMaskedSoftmaxBackwardOp)
