// Validation and shape/dtype inference of grouped_bias_add and grouped_bias_add_grad.
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

// aclnn's limits on the groups.
constexpr int64_t kMaxGroups = 2048;
// Rows of a grad_y grouped by group_idx: the A2 GroupedBiasAddGrad kernel keeps group offsets in int32, and aclnn
// requires group_idx values <= INT32_MAX.
constexpr int64_t kMaxGroupedRows = 2147483647;

struct GroupedBiasAddGradMeta {
  c10::SymInt groups;  // G
  c10::SymInt hidden;  // H
  OutputSpec out;      // (G, H), grad_y's dtype
};

// Shapes, dtypes and group_idx_type. Needs no tensor data, so it is also the Meta check.
GroupedBiasAddGradMeta check_grouped_bias_add_grad(const at::Tensor& grad_y,
                                                   const c10::optional<at::Tensor>& group_idx,
                                                   int64_t group_idx_type);

// The data-dependent part: reads a host copy of group_idx, validates every value and returns the G + 1
// row offsets [0, end_0, ..., end_{G-1} = N]. Any bad value is an error, never an out-of-bounds read.
// `op` and `rows_name` (the tensor whose rows are grouped) name the messages.
std::vector<int64_t> group_offsets(const char* op, const char* rows_name, const at::Tensor& group_idx_cpu,
                                   int64_t group_idx_type, int64_t rows);

// grouped_bias_add(x, bias, group_idx, group_idx_type, probs): with group_idx (int32/int64, 1-D, G <= 2048
// entries) x is (N, H) with N <= INT32_MAX and bias (G, H); without it x is (G, C, H) and bias (G, H) or
// (G, 1, H). bias has x's dtype and device. probs (optional): one weight per row of x, shape x.shape[:-1] or
// x.shape[:-1] + [1], any supported floating dtype, on x's device; out = x + probs * bias[group]. The
// group_idx values are checked by group_offsets("grouped_bias_add", "x", ...).
void check_grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs);

// grouped_bias_add's specification: its check, and one output like x (core/structured.h).
struct GroupedBiasAddOp : ForwardOp {
  static constexpr const char* kName = "grouped_bias_add";
  static LikeMeta check(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                        int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
    check_grouped_bias_add(x, bias, group_idx, group_idx_type, probs);
    return like_spec(x);
  }
};

// grouped_bias_add_grad's specification: its check and each output's spec (core/structured.h).
struct GroupedBiasAddGradOp {
  static constexpr const char* kName = "grouped_bias_add_grad";
  static constexpr std::array<const char*, 1> kOutputs{"out"};
  static GroupedBiasAddGradMeta check(const at::Tensor& grad_y, const c10::optional<at::Tensor>& group_idx,
                                      int64_t group_idx_type) {
    return check_grouped_bias_add_grad(grad_y, group_idx, group_idx_type);
  }
  static std::array<const OutputSpec*, 1> outputs(const GroupedBiasAddGradMeta& meta) { return {&meta.out}; }
};

}  // namespace npu_ext
