// prelu and prelu_backward (and its .out overload) as compositions of ATen ops, registered on
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
#include "ops/prelu/composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/composite.h"
#include "core/structured.h"
#include "ops/prelu/checks.h"

namespace npu_ext {
namespace composite {

at::Tensor prelu(const at::Tensor& self, const at::Tensor& weight) {
  check_prelu(self, weight);
  // at::prelu wants a 0-D/1-D weight; ours may have any shape with 1 or C elements.
  return finish(at::prelu(opmath(self), opmath(weight).reshape({-1})), self.scalar_type());
}

namespace {

// ---------------------------------------------------------------------------------------------------------
std::tuple<at::Tensor, at::Tensor> prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                                  const at::Tensor& weight) {
  const auto meta = check_prelu_backward(grad_output, self, weight);
  const at::Tensor x = opmath(self);
  const at::Tensor g = opmath(grad_output).expand(self.sizes());
  const at::Tensor w = opmath(weight).reshape({-1});
  at::Tensor w_b;
  std::vector<int64_t> reduce_dims;
  if (!meta.per_channel) {
    w_b = w.reshape({});
  } else {  // weight has C > 1 elements: self has rank >= 2, channel dim 1
    std::vector<int64_t> shape(self.dim(), 1);
    shape[1] = w.numel();
    w_b = w.reshape(shape);
    for (int64_t d = 0; d < self.dim(); ++d) {
      if (d != 1) reduce_dims.push_back(d);
    }
  }
  // The Atlas A2/A3 kernel's formulas (docs/operators.md, "Semantics notes", csrc/cpu/kernels/prelu_backward.cpp):
  // gi = (x > 0 ? 1 + 0 w : 0 + w) g; each grad_weight term (x > 0 ? 0 x : x) g + 0 gi_T (gi_T: gi rounded to
  // the dtype) is rounded to the dtype before the sum. NaN is not > 0: it takes the x <= 0 branch.
  const at::Tensor positive = x > 0;
  const at::Tensor gi = at::where(positive, (w_b * 0 + 1) * g, (w_b + 0) * g);
  const at::Tensor gi_t = finish(gi, meta.grad_input.dtype);
  const at::Tensor term = at::where(positive, x * 0, x) * g + gi_t.to(x.scalar_type()) * 0;
  const at::Tensor contrib = term.to(meta.grad_input.dtype).to(x.scalar_type());
  const at::Tensor gw = meta.per_channel ? contrib.sum(reduce_dims) : contrib.sum();
  return {gi_t, finish(gw.reshape(weight.sizes()), meta.grad_weight.dtype)};
}

}  // namespace
}  // namespace composite

NPU_EXT_COMPOSITE(PreluOp, composite::prelu)
NPU_EXT_COMPOSITE(PreluBackwardOp, composite::prelu_backward)  // .out: the result copied

}  // namespace npu_ext
