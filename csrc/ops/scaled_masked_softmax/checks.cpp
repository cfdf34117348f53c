#include "ops/scaled_masked_softmax/checks.h"

#include <ATen/ATen.h>

namespace npu_ext {

namespace {

// The 4-D softmax operand `t` (called `name`) and, unless the causal mask replaces it, its bool mask.
void check_softmax_operands(const char* op, const char* name, const at::Tensor& t, const at::Tensor& mask,
                            bool fix_triu_mask) {
  check_rank(op, name, t, 4);
  NPU_EXT_CHECK(t.sym_size(3) <= kMaxSoftmaxLastDim, op, "the last dimension of ", name, " must be at most ",
                kMaxSoftmaxLastDim, ", but got ", t.sym_size(3));
  if (fix_triu_mask) return;  // the causal mask is generated; the mask argument is ignored
  check_same_device(op, "mask", mask, name, t);
  NPU_EXT_CHECK(mask.scalar_type() == at::kBool, op, "mask must have dtype torch.bool, but got ",
                dtype_name(mask.scalar_type()));
  check_rank(op, "mask", mask, 4);
  bool ok = true;
  if (!mask.unsafeGetTensorImpl()->has_symbolic_sizes_strides() && !t.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    const c10::IntArrayRef m = mask.sizes(), s = t.sizes();  // real tensors: the same test on plain integers
    ok = m[2] == s[2] && m[3] == s[3];
    for (int d = 0; d < 2; ++d) ok = ok && (m[d] == s[d] || m[d] == 1);
  } else {
    ok = mask.sym_size(2) == t.sym_size(2) && mask.sym_size(3) == t.sym_size(3);
    for (int d = 0; d < 2; ++d) ok = ok && (mask.sym_size(d) == t.sym_size(d) || mask.sym_size(d) == 1);
  }
  NPU_EXT_CHECK(ok, op, "mask of shape ", shape_str(mask.sym_sizes()), " must match ", name, " ",
                shape_str(t.sym_sizes()), " in its last two dimensions and be equal or 1 in its first two");
}

}  // namespace

ScaledMaskedSoftmaxBackwardMeta check_scaled_masked_softmax_backward(const at::Tensor& grad_output,
                                                                     const at::Tensor& y, const at::Tensor& mask,
                                                                     bool fix_triu_mask) {
  constexpr const char* op = "scaled_masked_softmax_backward";
  // The mask too when fix_triu_mask ignores its values: a tensor on another device must not pick the kernel.
  check_one_device(op, {{"grad_output", grad_output}, {"y", y}, {"mask", mask}});
  check_same_device(op, "y", y, "grad_output", grad_output);
  check_float(op, "grad_output", grad_output);
  check_same_dtype(op, "y", y, "grad_output", grad_output);
  check_rank(op, "grad_output", grad_output, 4);
  NPU_EXT_CHECK(same_sizes(y, grad_output), op, "y must have the shape of grad_output ",
                shape_str(grad_output.sym_sizes()), ", but got ", shape_str(y.sym_sizes()));
  check_softmax_operands(op, "grad_output", grad_output, mask, fix_triu_mask);
  return {{grad_output.sym_sizes().vec(), grad_output.scalar_type()}};
}

FullyMasked check_scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, bool fix_triu_mask,
                                        c10::string_view fully_masked) {
  constexpr const char* op = "scaled_masked_softmax";
  NPU_EXT_CHECK(fully_masked == "uniform" || fully_masked == "zero", op,
                "fully_masked must be \"uniform\" or \"zero\", but got \"", fully_masked, "\"");
  check_one_device(op, {{"x", x}, {"mask", mask}});
  check_float(op, "x", x);
  check_softmax_operands(op, "x", x, mask, fix_triu_mask);
  return fully_masked == "zero" ? FullyMasked::Zero : FullyMasked::Uniform;
}

}  // namespace npu_ext
