// Validation and shape/dtype inference of gelu and gelu_backward_v2.
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
#include <vector>

#include "core/checks.h"

namespace npu_ext {

enum class GeluApproximate { None, Tanh };

struct GeluBackwardMeta {
  OutputSpec grad_input;  // broadcast(grad_output, self), result_type(grad_output, self)
  GeluApproximate approximate;
};

GeluBackwardMeta check_gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self,
                                        c10::string_view approximate);

// gelu(self, approximate): self fp16/bf16/fp32 (fp64 off-NPU), rank <= 8 (gelu_backward_v2's limit).
GeluApproximate check_gelu(const at::Tensor& self, c10::string_view approximate);

// gelu's specification: its check, and one output like self (core/structured.h).
struct GeluOp : ForwardOp {
  static constexpr const char* kName = "gelu";
  static LikeMeta check(const at::Tensor& self, c10::string_view approximate) {
    check_gelu(self, approximate);
    return like_spec(self);
  }
};

// gelu_backward_v2's specification: its check and each output's spec (core/structured.h).
struct GeluBackwardV2Op {
  static constexpr const char* kName = "gelu_backward_v2";
  static constexpr std::array<const char*, 1> kOutputs{"grad_input"};
  static GeluBackwardMeta check(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
    return check_gelu_backward_v2(grad_output, self, approximate);
  }
  static std::array<const OutputSpec*, 1> outputs(const GeluBackwardMeta& meta) { return {&meta.grad_input}; }
};

}  // namespace npu_ext
