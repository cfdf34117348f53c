// Every npu_ext operator schema, in one place. Kernels register against these names per dispatch key in
// csrc/cpu, csrc/meta and csrc/npu; the Python package adds autograd on top.
//
// Each op has a functional overload and an `.out` overload with keyword-only outputs that returns ().
#include <torch/library.h>

TORCH_LIBRARY(npu_ext, m) {
  m.def("gelu_backward_v2(Tensor grad_output, Tensor self, str approximate=\"none\") -> Tensor");
  m.def(
      "gelu_backward_v2.out(Tensor grad_output, Tensor self, str approximate=\"none\", *, "
      "Tensor(a!) grad_input) -> ()");

  m.def("prelu_backward(Tensor grad_output, Tensor self, Tensor weight) -> (Tensor, Tensor)");
  m.def(
      "prelu_backward.out(Tensor grad_output, Tensor self, Tensor weight, *, Tensor(a!) grad_input, "
      "Tensor(b!) grad_weight) -> ()");

  m.def("grouped_bias_add_grad(Tensor grad_y, Tensor? group_idx=None, int group_idx_type=0) -> Tensor");
  m.def(
      "grouped_bias_add_grad.out(Tensor grad_y, Tensor? group_idx=None, int group_idx_type=0, *, "
      "Tensor(a!) out) -> ()");

  m.def(
      "scaled_masked_softmax_backward(Tensor grad_output, Tensor y, Tensor mask, float scale=1.0, "
      "bool fix_triu_mask=False) -> Tensor");
  m.def(
      "scaled_masked_softmax_backward.out(Tensor grad_output, Tensor y, Tensor mask, float scale=1.0, "
      "bool fix_triu_mask=False, *, Tensor(a!) out) -> ()");

  m.def("logit_grad(Tensor x, Tensor dy, float eps=-1.0) -> Tensor");
  m.def("logit_grad.out(Tensor x, Tensor dy, float eps=-1.0, *, Tensor(a!) dx) -> ()");

  // Forward ops used by the autograd wrappers (torch_ext.gelu & co.). Their gradients are the backward ops
  // above; their autograd is C++ (csrc/autograd/forward_ops.cpp) on the generic Autograd key.
  m.def("gelu(Tensor self, str approximate=\"none\") -> Tensor");
  m.def("prelu(Tensor self, Tensor weight) -> Tensor");
  m.def("logit(Tensor self, float? eps=None) -> Tensor");
  // fully_masked: "uniform" (softmax of the -10000 fill) or "zero" (Megatron's fused kernel) for a row whose
  // every position is masked. probs: an optional weight per row of x, out = x + probs * bias[group] (MoE).
  m.def(
      "scaled_masked_softmax(Tensor x, Tensor mask, float scale=1.0, bool fix_triu_mask=False, "
      "str fully_masked=\"uniform\") -> Tensor");
  m.def(
      "grouped_bias_add(Tensor x, Tensor bias, Tensor? group_idx=None, int group_idx_type=0, Tensor? probs=None) "
      "-> Tensor");

  // Which CPU kernel variant this process runs: "DEFAULT", "AVX2" or "AVX512" (csrc/cpu/dispatch.cpp). (The
  // NPU library adds one more introspection op, _npu_status() -> str, in csrc/npu/status.cpp.)
  m.def("_cpu_capability() -> str");
}
