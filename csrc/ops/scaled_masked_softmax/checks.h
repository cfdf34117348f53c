// Validation and shape/dtype inference of scaled_masked_softmax and scaled_masked_softmax_backward.
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

// aclnn's limit on the softmax dimension.
constexpr int64_t kMaxSoftmaxLastDim = 4096;

struct ScaledMaskedSoftmaxBackwardMeta {
  OutputSpec out;  // grad_output's shape and dtype
};

ScaledMaskedSoftmaxBackwardMeta check_scaled_masked_softmax_backward(const at::Tensor& grad_output,
                                                                     const at::Tensor& y, const at::Tensor& mask,
                                                                     bool fix_triu_mask);

// What scaled_masked_softmax returns for a row whose every position is masked: the uniform row 1 / S2 that
// softmax of a constant -10000 row gives (Megatron's torch path, aclnnScaledMaskedSoftmax), or zeros (Megatron's
// fused CUDA kernel, apex scaled_masked_softmax.h). The gradient of such a row is zero either way.
enum class FullyMasked { Uniform, Zero };

// scaled_masked_softmax(x, mask, scale, fix_triu_mask, fully_masked): x 4-D (B, N, S1, S2) with S2 <= 4096;
// mask bool 4-D, last two dims (S1, S2), first two equal or 1; the mask is ignored when fix_triu_mask is
// true. fully_masked is "uniform" or "zero".
FullyMasked check_scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, bool fix_triu_mask,
                                        c10::string_view fully_masked);

// scaled_masked_softmax's specification: its check, and one output like x (core/structured.h).
struct ScaledMaskedSoftmaxOp : ForwardOp {
  static constexpr const char* kName = "scaled_masked_softmax";
  static LikeMeta check(const at::Tensor& x, const at::Tensor& mask, double /*scale*/, bool fix_triu_mask,
                        c10::string_view fully_masked) {
    check_scaled_masked_softmax(x, mask, fix_triu_mask, fully_masked);
    return like_spec(x);
  }
};

// scaled_masked_softmax_backward's specification: its check and each output's spec (core/structured.h).
struct ScaledMaskedSoftmaxBackwardOp {
  static constexpr const char* kName = "scaled_masked_softmax_backward";
  static constexpr std::array<const char*, 1> kOutputs{"out"};
  static ScaledMaskedSoftmaxBackwardMeta check(const at::Tensor& grad_output, const at::Tensor& y,
                                               const at::Tensor& mask, double /*scale*/, bool fix_triu_mask) {
    return check_scaled_masked_softmax_backward(grad_output, y, mask, fix_triu_mask);
  }
  static std::array<const OutputSpec*, 1> outputs(const ScaledMaskedSoftmaxBackwardMeta& meta) { return {&meta.out}; }
};

}  // namespace npu_ext
