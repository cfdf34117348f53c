// The prelu family's operators in the npu_ext library: their schemas, and the eager fast path of the forward op
// (torch_ext._C._prelu, core/fast_path.h). Kernels register against these names per dispatch key in this folder
// (cpu.cpp, composite.cpp, npu.cpp, autograd.cpp), the Meta kernels here, from the ops' specifications (checks.h);
// the Python package adds autocast and the module API.
//
// The backward op has a functional overload and an `.out` overload with keyword-only outputs that returns ().
#include <torch/library.h>

#include "core/fast_path.h"
#include "core/structured.h"
#include "ops/prelu/checks.h"

TORCH_LIBRARY_FRAGMENT(npu_ext, m) {
  m.def("prelu(Tensor self, Tensor weight) -> Tensor");
  m.def("prelu_backward(Tensor grad_output, Tensor self, Tensor weight) -> (Tensor, Tensor)");
  m.def(
      "prelu_backward.out(Tensor grad_output, Tensor self, Tensor weight, *, Tensor(a!) grad_input, "
      "Tensor(b!) grad_weight) -> ()");
}

NPU_EXT_FAST_PATH("_prelu", "npu_ext::prelu", at::Tensor(const at::Tensor&, const at::Tensor&))

// The Meta kernels (fake tensors, torch.compile, export): each op's check and its outputs' specs (checks.h).
NPU_EXT_META(npu_ext::PreluOp)
NPU_EXT_META(npu_ext::PreluBackwardOp)
