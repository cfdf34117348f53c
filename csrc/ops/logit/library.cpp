// The logit family's operators in the npu_ext library: their schemas, and the eager fast path of the forward op
// (torch_ext._C._logit, core/fast_path.h). Kernels register against these names per dispatch key in this folder
// (cpu.cpp, composite.cpp, npu.cpp, autograd.cpp), the Meta kernels here, from the ops' specifications (checks.h);
// the Python package adds autocast and the module API.
//
// The backward op has a functional overload and an `.out` overload with keyword-only outputs that returns ().
#include <torch/library.h>

#include "core/fast_path.h"
#include "core/structured.h"
#include "ops/logit/checks.h"

TORCH_LIBRARY_FRAGMENT(npu_ext, m) {
  m.def("logit(Tensor self, float? eps=None) -> Tensor");
  m.def("logit_grad(Tensor x, Tensor dy, float eps=-1.0) -> Tensor");
  m.def("logit_grad.out(Tensor x, Tensor dy, float eps=-1.0, *, Tensor(a!) dx) -> ()");
}

NPU_EXT_FAST_PATH("_logit", "npu_ext::logit", at::Tensor(const at::Tensor&, c10::optional<double>))

// The Meta kernels (fake tensors, torch.compile, export): each op's check and its outputs' specs (checks.h).
NPU_EXT_META(npu_ext::LogitOp)
NPU_EXT_META(npu_ext::LogitGradOp)
