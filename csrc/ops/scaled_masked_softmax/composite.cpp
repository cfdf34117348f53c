// scaled_masked_softmax and scaled_masked_softmax_backward (and its .out overload) as compositions of ATen ops, registered on
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
#include "ops/scaled_masked_softmax/composite.h"

#include <ATen/ATen.h>
#include <ATen/OpMathType.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

#include "core/composite.h"
#include "core/structured.h"
#include "ops/scaled_masked_softmax/checks.h"

namespace npu_ext {
namespace composite {

at::Tensor scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, double scale, bool fix_triu_mask,
                                 c10::string_view fully_masked) {
  const FullyMasked policy = check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
  const at::Tensor m = fix_triu_mask
                           ? at::ones({x.size(2), x.size(3)}, x.options().dtype(at::kBool)).triu(1)  // column > row
                           : mask;
  const at::Tensor z = opmath(x).mul(scale).masked_fill(m, -10000.0);
  at::Tensor y = at::_softmax(z, -1, false);
  // A causal row is never fully masked (its diagonal is not).
  if (policy == FullyMasked::Zero && !fix_triu_mask) y = y.masked_fill(m.all(-1, /*keepdim=*/true), 0.0);
  return finish(y, x.scalar_type());
}

namespace {

// ---------------------------------------------------------------------------------------------------------
at::Tensor scaled_masked_softmax_backward(const at::Tensor& grad_output, const at::Tensor& y, const at::Tensor& mask,
                                          double scale, bool fix_triu_mask) {
  check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  const at::Tensor g = opmath(grad_output);
  const at::Tensor yy = opmath(y);
  const at::Tensor s = (g * yy).sum(-1, /*keepdim=*/true);  // the whole row, masked positions included
  const at::Tensor out = (g - s).mul_(yy).mul_(scale);
  const at::Tensor m = fix_triu_mask
                           ? at::ones({grad_output.size(2), grad_output.size(3)}, mask.options().dtype(at::kBool)
                                                                                      .device(grad_output.device()))
                                 .triu(1)  // column > row
                           : mask;
  return finish(out.masked_fill(m, 0.0), grad_output.scalar_type());  // a select: masked NaN/Inf become 0
}

}  // namespace
}  // namespace composite

NPU_EXT_COMPOSITE(ScaledMaskedSoftmaxOp, composite::scaled_masked_softmax)
NPU_EXT_COMPOSITE(ScaledMaskedSoftmaxBackwardOp, composite::scaled_masked_softmax_backward)  // .out: the result copied

}  // namespace npu_ext
