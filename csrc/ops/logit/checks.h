// Validation and shape/dtype inference of logit and logit_grad.
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

struct LogitGradMeta {
  OutputSpec dx;  // x's shape and dtype
};

LogitGradMeta check_logit_grad(const at::Tensor& x, const at::Tensor& dy);

// The interval on which dx = dy / (x (1 - x)), as the op uses it: [eps, 1 - eps] with eps rounded to fp32 (as
// the NPU kernel does; fp64 inputs keep it exact) and 1 - eps computed in that precision, 0 elsewhere (clamp);
// for eps < 0 or NaN, [0, 1] with NaN elsewhere. "Elsewhere" includes x = NaN, as the NPU kernel selects
// (x >= lo AND x <= hi keeps the quotient): NaN x gives 0 when eps >= 0 and NaN otherwise.
struct LogitGradBounds {
  bool clamp;
  double lo, hi;
};

inline LogitGradBounds logit_grad_bounds(double eps, at::ScalarType x_dtype) {
  const bool fp64 = x_dtype == at::kDouble;
  const double e = fp64 ? eps : static_cast<double>(static_cast<float>(eps));
  if (!(e >= 0)) return {false, 0.0, 1.0};
  return {true, e, fp64 ? 1.0 - e : static_cast<double>(1.0f - static_cast<float>(e))};
}

// logit(self, eps): self fp16/bf16/fp32 (fp64 off-NPU), rank <= 8 (logit_grad's limit).
void check_logit(const at::Tensor& self);

// logit's specification: its check, and one output like self (core/structured.h).
struct LogitOp : ForwardOp {
  static constexpr const char* kName = "logit";
  static LikeMeta check(const at::Tensor& self, c10::optional<double> /*eps*/) {
    check_logit(self);
    return like_spec(self);
  }
};

// logit_grad's specification: its check and each output's spec (core/structured.h).
struct LogitGradOp {
  static constexpr const char* kName = "logit_grad";
  static constexpr std::array<const char*, 1> kOutputs{"dx"};
  static LogitGradMeta check(const at::Tensor& x, const at::Tensor& dy, double /*eps*/) {
    return check_logit_grad(x, dy);
  }
  static std::array<const OutputSpec*, 1> outputs(const LogitGradMeta& meta) { return {&meta.dx}; }
};

}  // namespace npu_ext
