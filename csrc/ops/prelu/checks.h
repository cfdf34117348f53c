// Validation and shape/dtype inference of prelu and prelu_backward.
//
// Each check validates one call and returns what it infers (the output specs and the parsed arguments); the CPU,
// Meta, composite and NPU kernels of the family all call it first, so an input is accepted or rejected alike on
// every device with the same message (core/checks.h: the conventions and the shared helpers).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

#include <array>
#include <cstdint>
#include <tuple>
#include <vector>

#include "core/checks.h"

namespace npu_ext {

struct PreluBackwardMeta {
  c10::SymInt channels;  // C = self.size(1) if self.dim() > 1 else 1
  bool per_channel;  // weight has C elements (and C > 1 or weight.numel() != 1)
  OutputSpec grad_input;   // self's shape and dtype
  OutputSpec grad_weight;  // weight's shape and dtype
};

PreluBackwardMeta check_prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& weight);

// prelu(self, weight): weight has self's dtype and device, 1 or C elements (C = self.size(1) if
// self.dim() > 1 else 1); both of rank <= 8. Output: self's shape and dtype.
void check_prelu(const at::Tensor& self, const at::Tensor& weight);

// prelu's specification: its check, and one output like self (core/structured.h).
struct PreluOp : ForwardOp {
  static constexpr const char* kName = "prelu";
  static LikeMeta check(const at::Tensor& self, const at::Tensor& weight) {
    check_prelu(self, weight);
    return like_spec(self);
  }
};

// prelu_backward's specification: its check and each output's spec (core/structured.h).
struct PreluBackwardOp {
  static constexpr const char* kName = "prelu_backward";
  static constexpr std::array<const char*, 2> kOutputs{"grad_input", "grad_weight"};
  static PreluBackwardMeta check(const at::Tensor& grad_output, const at::Tensor& self, const at::Tensor& weight) {
    return check_prelu_backward(grad_output, self, weight);
  }
  static std::array<const OutputSpec*, 2> outputs(const PreluBackwardMeta& meta) {
    return {&meta.grad_input, &meta.grad_weight};
  }
};

}  // namespace npu_ext
