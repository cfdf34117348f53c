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

#include <cstdint>
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

}  // namespace npu_ext
