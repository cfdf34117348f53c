// Shared validation and shape/dtype inference for every npu_ext operator.
//
// This is the single source of truth for "what is a valid call and what does it return". The CPU kernels,
// the Meta (fake) kernels and the NPU path all call these functions first, so an input is accepted or
// rejected identically on every device, with the same message, before any work is done.
//
// Every failure is a RuntimeError (TORCH_CHECK) whose message starts with "npu_ext.<op>: " and names the
// offending argument. Sizes are read as SymInts, so the same checks serve fake tensors with symbolic
// shapes (torch.compile, dynamic export) as well as real tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace npu_ext {

// Hardware limits documented by aclnn; enforced everywhere so CPU-validated code runs unchanged on an NPU.
constexpr int64_t kMaxRank = 8;
constexpr int64_t kMaxSoftmaxLastDim = 4096;
constexpr int64_t kMaxGroups = 2048;
// Rows of a grad_y grouped by group_idx: the A2 GroupedBiasAddGrad kernel keeps group offsets in int32, and aclnn
// requires group_idx values <= INT32_MAX.
constexpr int64_t kMaxGroupedRows = 2147483647;

// The shape and dtype of one output. Each backward op's check returns the spec of every output, and the CPU,
// Meta and NPU kernels all allocate (new_output) and validate `.out` tensors (check_out) from it.
struct OutputSpec {
  std::vector<c10::SymInt> shape;
  at::ScalarType dtype;
};

// ---------------------------------------------------------------------------------------------------------
// gelu_backward_v2
enum class GeluApproximate { None, Tanh };

struct GeluBackwardMeta {
  OutputSpec grad_input;  // broadcast(grad_output, self), result_type(grad_output, self)
  GeluApproximate approximate;
};

GeluBackwardMeta check_gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self,
                                        c10::string_view approximate);

// ---------------------------------------------------------------------------------------------------------
// prelu_backward
struct PreluBackwardMeta {
  c10::SymInt channels;  // C = self.size(1) if self.dim() > 1 else 1
  bool per_channel;  // weight has C elements (and C > 1 or weight.numel() != 1)
  OutputSpec grad_input;   // self's shape and dtype
  OutputSpec grad_weight;  // weight's shape and dtype
};

PreluBackwardMeta check_prelu_backward(const at::Tensor& grad_output, const at::Tensor& self,
                                       const at::Tensor& weight);

// ---------------------------------------------------------------------------------------------------------
// grouped_bias_add_grad
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

// ---------------------------------------------------------------------------------------------------------
// scaled_masked_softmax_backward
struct ScaledMaskedSoftmaxBackwardMeta {
  OutputSpec out;  // grad_output's shape and dtype
};

ScaledMaskedSoftmaxBackwardMeta check_scaled_masked_softmax_backward(const at::Tensor& grad_output,
                                                                     const at::Tensor& y, const at::Tensor& mask,
                                                                     bool fix_triu_mask);

// ---------------------------------------------------------------------------------------------------------
// logit_grad
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

// ---------------------------------------------------------------------------------------------------------
// Forward ops (torch_ext.gelu & co.; their gradients are the backward ops above). Same rules and message
// style ("npu_ext.<op>: <arg> ..."). These checks read sizes through sym_sizes(), so the Meta kernels also
// work on fake tensors with symbolic shapes (torch.compile dynamic shapes, torch.export).

// gelu(self, approximate): self fp16/bf16/fp32 (fp64 off-NPU), rank <= 8 (gelu_backward_v2's limit).
GeluApproximate check_gelu(const at::Tensor& self, c10::string_view approximate);

// prelu(self, weight): weight has self's dtype and device, 1 or C elements (C = self.size(1) if
// self.dim() > 1 else 1); both of rank <= 8. Output: self's shape and dtype.
void check_prelu(const at::Tensor& self, const at::Tensor& weight);

// logit(self, eps): self fp16/bf16/fp32 (fp64 off-NPU), rank <= 8 (logit_grad's limit).
void check_logit(const at::Tensor& self);

// What scaled_masked_softmax returns for a row whose every position is masked: the uniform row 1 / S2 that
// softmax of a constant -10000 row gives (Megatron's torch path, aclnnScaledMaskedSoftmax), or zeros (Megatron's
// fused CUDA kernel, apex scaled_masked_softmax.h). The gradient of such a row is zero either way.
enum class FullyMasked { Uniform, Zero };

// scaled_masked_softmax(x, mask, scale, fix_triu_mask, fully_masked): x 4-D (B, N, S1, S2) with S2 <= 4096;
// mask bool 4-D, last two dims (S1, S2), first two equal or 1; the mask is ignored when fix_triu_mask is
// true. fully_masked is "uniform" or "zero".
FullyMasked check_scaled_masked_softmax(const at::Tensor& x, const at::Tensor& mask, bool fix_triu_mask,
                                        c10::string_view fully_masked);

// grouped_bias_add(x, bias, group_idx, group_idx_type, probs): with group_idx (int32/int64, 1-D, G <= 2048
// entries) x is (N, H) with N <= INT32_MAX and bias (G, H); without it x is (G, C, H) and bias (G, H) or
// (G, 1, H). bias has x's dtype and device. probs (optional): one weight per row of x, shape x.shape[:-1] or
// x.shape[:-1] + [1], any supported floating dtype, on x's device; out = x + probs * bias[group]. The
// group_idx values are checked by group_offsets("grouped_bias_add", "x", ...).
void check_grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs);

// ---------------------------------------------------------------------------------------------------------
// .out overloads: the caller-provided output must already have the inferred shape and dtype, and live on
// the inputs' device. (No resizing: a wrong output is a caller bug worth reporting.)
void check_out(const char* op, const char* name, const at::Tensor& out, c10::SymIntArrayRef shape,
               at::ScalarType dtype, const at::Tensor& like);
void check_out(const char* op, const char* name, const at::Tensor& out, const OutputSpec& spec,
               const at::Tensor& like);

// A new (contiguous) output of the given spec on like's device.
at::Tensor new_output(const OutputSpec& spec, const at::Tensor& like);

// Every tensor argument of one call on one device, checked first by every op's check (mixed devices would
// otherwise pick a kernel from the highest dispatch key, e.g. Meta, and skip arguments it ignores). The first
// defined tensor is the reference; an undefined tensor (absent optional) is skipped. The message names the
// argument: "npu_ext.<op>: <name> must be on the same device as <ref> (<device>), but got <device>".
struct NamedTensor {
  const char* name;
  const at::Tensor& tensor;
};
void check_one_device(const char* op, std::initializer_list<NamedTensor> tensors);

// True when `t` is one of the floating dtypes this device supports (fp16/bf16/fp32, plus fp64 off-NPU).
bool is_supported_float(const at::Tensor& t);

// The NPU path's own dtype guard, called by csrc/npu after the op's shared check: aclnn has only fp16, bf16
// and fp32 kernels for these ops. For a PrivateUse1 tensor the shared check has already rejected anything
// else with the same message; this also holds the NPU sources to aclnn's dtypes when they are run on tensors
// of another device type (as the host stand-in tests in tests/test_npu_path.py do under the aarch64 emulation).
void check_npu_float(const char* op, const char* name, const at::Tensor& t);

}  // namespace npu_ext
