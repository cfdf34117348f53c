#include "ops/prelu/checks.h"

#include <ATen/ATen.h>

namespace npu_ext {

namespace {

// prelu's weight against the channel dimension of self; returns C (self.size(1), or 1 below rank 2).
c10::SymInt check_prelu_weight(const char* op, const at::Tensor& self, const at::Tensor& weight) {
  const c10::SymInt channels = self.dim() > 1 ? self.sym_size(1) : c10::SymInt(1);
  const c10::SymInt nw = weight.sym_numel();
  if (channels == 1) {
    NPU_EXT_CHECK(nw == 1, op, "weight must have 1 element (self has a single channel), but got ", nw);
  } else {
    NPU_EXT_CHECK(nw == 1 || nw == channels, op, "weight must have 1 or ", channels,
                  " elements (the size of dimension 1 of self), but got ", nw);
  }
  return channels;
}

}  // namespace

PreluBackwardMeta check_prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& weight) {
  constexpr const char* op = "prelu_backward";
  check_one_device(op, {{"self", self}, {"grad_output", grad_output}, {"weight", weight}});
  check_same_device(op, "grad_output", grad_output, "self", self);
  check_same_device(op, "weight", weight, "self", self);
  check_float(op, "self", self);
  check_same_dtype(op, "grad_output", grad_output, "self", self);
  check_same_dtype(op, "weight", weight, "self", self);
  check_max_rank(op, "self", self, kMaxRank);
  check_max_rank(op, "grad_output", grad_output, kMaxRank);
  check_max_rank(op, "weight", weight, kMaxRank);
  std::vector<c10::SymInt> b;
  NPU_EXT_CHECK(broadcast_shapes(grad_output.sym_sizes(), self.sym_sizes(), b) && c10::SymIntArrayRef(b) == self.sym_sizes(),
                op, "grad_output of shape ", shape_str(grad_output.sym_sizes()),
                " must broadcast to the shape of self ", shape_str(self.sym_sizes()));
  PreluBackwardMeta meta;
  meta.channels = check_prelu_weight(op, self, weight);
  meta.per_channel = weight.sym_numel() != 1;
  meta.grad_input = {self.sym_sizes().vec(), self.scalar_type()};
  meta.grad_weight = {weight.sym_sizes().vec(), weight.scalar_type()};
  return meta;
}

void check_prelu(const at::Tensor& self, const at::Tensor& weight) {
  constexpr const char* op = "prelu";
  check_one_device(op, {{"self", self}, {"weight", weight}});
  check_same_device(op, "weight", weight, "self", self);
  check_float(op, "self", self);
  check_same_dtype(op, "weight", weight, "self", self);
  check_max_rank(op, "self", self, kMaxRank);
  check_max_rank(op, "weight", weight, kMaxRank);
  check_prelu_weight(op, self, weight);
}

}  // namespace npu_ext
