// The gelu family's operators in the npu_ext library: their schemas, and the eager fast path of the forward op
// (torch_ext._C._gelu, core/fast_path.h). Kernels register against these names per dispatch key in this folder
// (cpu.cpp, composite.cpp, npu.cpp, autograd.cpp), the Meta kernels here, from the ops' specifications (checks.h);
// the Python package adds autocast and the module API.
//
// The backward op has a functional overload and an `.out` overload with keyword-only outputs that returns ().
#include <torch/library.h>

#include "core/fast_path.h"
#include "core/structured.h"
#include "ops/gelu/checks.h"

TORCH_LIBRARY_FRAGMENT(npu_ext, m) {
  m.def("gelu(Tensor self, str approximate=\"none\") -> Tensor");
  m.def("gelu_backward_v2(Tensor grad_output, Tensor self, str approximate=\"none\") -> Tensor");
  m.def(
      "gelu_backward_v2.out(Tensor grad_output, Tensor self, str approximate=\"none\", *, "
      "Tensor(a!) grad_input) -> ()");
}

NPU_EXT_FAST_PATH("_gelu", "npu_ext::gelu", at::Tensor(const at::Tensor&, c10::string_view))

// The Meta kernels (fake tensors, torch.compile, export): each op's check and its outputs' specs (checks.h).
NPU_EXT_META(npu_ext::GeluOp)
NPU_EXT_META(npu_ext::GeluBackwardV2Op)
