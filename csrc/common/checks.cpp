#include "common/checks.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>
#include <c10/util/irange.h>

#include <sstream>
#include <string>

namespace npu_ext {
namespace {

#define NPU_EXT_CHECK(cond, op, ...) TORCH_CHECK((cond), "npu_ext.", op, ": ", __VA_ARGS__)

std::string dtype_name(at::ScalarType t) { return "torch." + std::string(c10::getDtypeNames(t).first); }

std::string shape_str(c10::SymIntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

const char* float_dtypes_for(const at::Tensor& t) {
  return t.device().is_privateuseone() ? "torch.float16, torch.bfloat16 or torch.float32"
                                       : "torch.float16, torch.bfloat16, torch.float32 or torch.float64";
}

void check_float(const char* op, const char* name, const at::Tensor& t) {
  NPU_EXT_CHECK(is_supported_float(t), op, name, " must have dtype ", float_dtypes_for(t), ", but got ",
                dtype_name(t.scalar_type()));
}

void check_same_dtype(const char* op, const char* name, const at::Tensor& t, const char* ref_name,
                      const at::Tensor& ref) {
  NPU_EXT_CHECK(t.scalar_type() == ref.scalar_type(), op, name, " must have the same dtype as ", ref_name,
                " (", dtype_name(ref.scalar_type()), "), but got ", dtype_name(t.scalar_type()));
}

void check_same_device(const char* op, const char* name, const at::Tensor& t, const char* ref_name,
                       const at::Tensor& ref) {
  NPU_EXT_CHECK(t.device() == ref.device(), op, name, " must be on the same device as ", ref_name, " (",
                ref.device(), "), but got ", t.device());
}

void check_max_rank(const char* op, const char* name, const at::Tensor& t, int64_t max_rank) {
  NPU_EXT_CHECK(t.dim() <= max_rank, op, name, " must have at most ", max_rank, " dimensions, but got ",
                t.dim());
}

void check_rank(const char* op, const char* name, const at::Tensor& t, int64_t rank) {
  NPU_EXT_CHECK(t.dim() == rank, op, name, " must be ", rank, "-D, but got a ", t.dim(), "-D tensor of shape ",
                shape_str(t.sym_sizes()));
}

// NumPy broadcasting of two shapes; false when they do not broadcast.
bool broadcast_shapes(c10::SymIntArrayRef a, c10::SymIntArrayRef b, std::vector<c10::SymInt>& out) {
  const size_t n = std::max(a.size(), b.size());
  out.assign(n, c10::SymInt(1));
  for (size_t i = 0; i < n; ++i) {
    const c10::SymInt da = i < n - a.size() ? c10::SymInt(1) : a[i - (n - a.size())];
    const c10::SymInt db = i < n - b.size() ? c10::SymInt(1) : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}


GeluApproximate parse_approximate(const char* op, c10::string_view approximate) {
  if (approximate == "tanh") return GeluApproximate::Tanh;
  NPU_EXT_CHECK(approximate == "none", op, "approximate must be \"none\" or \"tanh\", but got \"", approximate, "\"");
  return GeluApproximate::None;
}

// group_idx_type, group_idx and the rank of the grouped operand `t` (called `name`): 2-D (N, H) with group_idx,
// 3-D (G, C, H) without. Returns G.
c10::SymInt check_grouping(const char* op, const char* name, const at::Tensor& t,
                           const c10::optional<at::Tensor>& group_idx, int64_t group_idx_type) {
  NPU_EXT_CHECK(group_idx_type == 0 || group_idx_type == 1, op,
                "group_idx_type must be 0 (cumulative end offsets) or 1 (per-group counts), but got ",
                group_idx_type);
  if (!group_idx.has_value()) {
    NPU_EXT_CHECK(t.dim() == 3, op, name, " must be 3-D (G, C, H) when group_idx is None, but got a ", t.dim(),
                  "-D tensor of shape ", shape_str(t.sym_sizes()));
    return t.sym_size(0);
  }
  const at::Tensor& gi = *group_idx;
  check_same_device(op, "group_idx", gi, name, t);
  NPU_EXT_CHECK(gi.scalar_type() == at::kInt || gi.scalar_type() == at::kLong, op,
                "group_idx must have dtype torch.int32 or torch.int64, but got ", dtype_name(gi.scalar_type()));
  check_rank(op, "group_idx", gi, 1);
  NPU_EXT_CHECK(gi.sym_size(0) <= kMaxGroups, op, "group_idx may hold at most ", kMaxGroups, " groups, but got ",
                gi.sym_size(0));
  NPU_EXT_CHECK(t.dim() == 2, op, name, " must be 2-D (N, H) when group_idx is given, but got a ", t.dim(),
                "-D tensor of shape ", shape_str(t.sym_sizes()));
  NPU_EXT_CHECK(t.sym_size(0) <= kMaxGroupedRows, op, name, " may have at most ", kMaxGroupedRows,
                " rows (INT32_MAX: aclnn keeps group offsets in int32) when group_idx is given, but got ",
                t.sym_size(0));
  return gi.sym_size(0);
}

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
  bool ok = mask.sym_size(2) == t.sym_size(2) && mask.sym_size(3) == t.sym_size(3);
  for (int d = 0; d < 2; ++d) ok = ok && (mask.sym_size(d) == t.sym_size(d) || mask.sym_size(d) == 1);
  NPU_EXT_CHECK(ok, op, "mask of shape ", shape_str(mask.sym_sizes()), " must match ", name, " ",
                shape_str(t.sym_sizes()), " in its last two dimensions and be equal or 1 in its first two");
}
}  // namespace

bool is_supported_float(const at::Tensor& t) {
  switch (t.scalar_type()) {
    case at::kHalf:
    case at::kBFloat16:
    case at::kFloat:
      return true;
    case at::kDouble:
      return !t.device().is_privateuseone();  // aclnn has no fp64 kernels; CPU and Meta do
    default:
      return false;
  }
}

void check_npu_float(const char* op, const char* name, const at::Tensor& t) {
  const auto s = t.scalar_type();
  NPU_EXT_CHECK(s == at::kHalf || s == at::kBFloat16 || s == at::kFloat, op, name,
                " must have dtype torch.float16, torch.bfloat16 or torch.float32, but got ", dtype_name(s));
}

void check_one_device(const char* op, std::initializer_list<NamedTensor> tensors) {
  const NamedTensor* ref = nullptr;
  for (const auto& t : tensors) {
    if (!t.tensor.defined()) continue;
    if (ref == nullptr) {
      ref = &t;
      continue;
    }
    check_same_device(op, t.name, t.tensor, ref->name, ref->tensor);
  }
}

// ---------------------------------------------------------------------------------------------------------
GeluBackwardMeta check_gelu_backward_v2(const at::Tensor& grad_output, const at::Tensor& self,
                                        c10::string_view approximate) {
  constexpr const char* op = "gelu_backward_v2";
  check_one_device(op, {{"grad_output", grad_output}, {"self", self}});
  GeluBackwardMeta meta;
  meta.approximate = parse_approximate(op, approximate);
  check_same_device(op, "self", self, "grad_output", grad_output);
  check_float(op, "grad_output", grad_output);
  check_float(op, "self", self);
  // aclnn documents 0-8 dimensions for both inputs (and so for their broadcast shape, the output's)
  check_max_rank(op, "grad_output", grad_output, kMaxRank);
  check_max_rank(op, "self", self, kMaxRank);
  NPU_EXT_CHECK(broadcast_shapes(grad_output.sym_sizes(), self.sym_sizes(), meta.grad_input.shape), op, "grad_output of shape ",
                shape_str(grad_output.sym_sizes()), " and self of shape ", shape_str(self.sym_sizes()),
                " do not broadcast");
  meta.grad_input.dtype = at::result_type(grad_output, self);
  return meta;
}

// ---------------------------------------------------------------------------------------------------------
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

// ---------------------------------------------------------------------------------------------------------
GroupedBiasAddGradMeta check_grouped_bias_add_grad(const at::Tensor& grad_y,
                                                   const c10::optional<at::Tensor>& group_idx,
                                                   int64_t group_idx_type) {
  constexpr const char* op = "grouped_bias_add_grad";
  check_one_device(op, {{"grad_y", grad_y}, {"group_idx", group_idx.has_value() ? *group_idx : at::Tensor()}});
  check_float(op, "grad_y", grad_y);
  GroupedBiasAddGradMeta meta;
  meta.groups = check_grouping(op, "grad_y", grad_y, group_idx, group_idx_type);
  meta.hidden = grad_y.sym_size(-1);
  meta.out = {{meta.groups, meta.hidden}, grad_y.scalar_type()};
  return meta;
}

std::vector<int64_t> group_offsets(const char* op, const char* rows_name, const at::Tensor& group_idx_cpu,
                                   int64_t group_idx_type, int64_t rows) {
  TORCH_INTERNAL_ASSERT(group_idx_cpu.device().is_cpu() && group_idx_cpu.dim() == 1);
  const at::Tensor idx = group_idx_cpu.to(at::kLong).contiguous();
  const int64_t* v = idx.const_data_ptr<int64_t>();
  const int64_t g = idx.numel();
  std::vector<int64_t> offsets(static_cast<size_t>(g) + 1, 0);
  for (const auto j : c10::irange(g)) {
    NPU_EXT_CHECK(v[j] >= 0, op, "group_idx must be non-negative, but group_idx[", j, "] = ", v[j]);
    if (group_idx_type == 0) {
      NPU_EXT_CHECK(v[j] >= offsets[j], op, "group_idx must be non-decreasing (cumulative end offsets), but group_idx[",
                    j, "] = ", v[j], " < group_idx[", j - 1, "] = ", offsets[j]);
      NPU_EXT_CHECK(v[j] <= rows, op, "group_idx[", j, "] = ", v[j], " exceeds the number of rows of ", rows_name, " (", rows,
                    ")");
      offsets[j + 1] = v[j];
    } else {
      NPU_EXT_CHECK(v[j] <= rows - offsets[j], op, "group_idx counts must sum to the number of rows of ", rows_name, " (",
                    rows, "), but the first ", j + 1, " counts already sum to ", offsets[j] + v[j]);
      offsets[j + 1] = offsets[j] + v[j];
    }
  }
  if (group_idx_type == 0) {
    NPU_EXT_CHECK(offsets[g] == rows, op, "the last entry of group_idx must equal the number of rows of ", rows_name, " (",
                  rows, "), but got ", g == 0 ? std::string("an empty group_idx") : std::to_string(offsets[g]));
  } else {
    NPU_EXT_CHECK(offsets[g] == rows, op, "group_idx counts must sum to the number of rows of ", rows_name, " (", rows,
                  "), but they sum to ", offsets[g]);
  }
  return offsets;
}

// ---------------------------------------------------------------------------------------------------------
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
  NPU_EXT_CHECK(y.sym_sizes() == grad_output.sym_sizes(), op, "y must have the shape of grad_output ",
                shape_str(grad_output.sym_sizes()), ", but got ", shape_str(y.sym_sizes()));
  check_softmax_operands(op, "grad_output", grad_output, mask, fix_triu_mask);
  return {{grad_output.sym_sizes().vec(), grad_output.scalar_type()}};
}

// ---------------------------------------------------------------------------------------------------------
LogitGradMeta check_logit_grad(const at::Tensor& x, const at::Tensor& dy) {
  constexpr const char* op = "logit_grad";
  check_one_device(op, {{"x", x}, {"dy", dy}});
  check_same_device(op, "dy", dy, "x", x);
  check_float(op, "x", x);
  check_same_dtype(op, "dy", dy, "x", x);
  check_max_rank(op, "x", x, kMaxRank);
  NPU_EXT_CHECK(dy.sym_sizes() == x.sym_sizes(), op, "dy must have the shape of x ", shape_str(x.sym_sizes()), ", but got ",
                shape_str(dy.sym_sizes()));
  return {{x.sym_sizes().vec(), x.scalar_type()}};
}

// ---------------------------------------------------------------------------------------------------------
// Forward ops. Sizes are read through sym_sizes()/sym_size() so that the Meta kernels run on fake tensors
// with symbolic shapes; for real tensors this is the same as sizes().
GeluApproximate check_gelu(const at::Tensor& self, c10::string_view approximate) {
  constexpr const char* op = "gelu";
  const GeluApproximate a = parse_approximate(op, approximate);
  check_float(op, "self", self);
  check_max_rank(op, "self", self, kMaxRank);  // gelu_backward_v2's limit: fails here, not in the backward
  return a;
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

void check_logit(const at::Tensor& self) {
  constexpr const char* op = "logit";
  check_float(op, "self", self);
  check_max_rank(op, "self", self, kMaxRank);
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

void check_grouped_bias_add(const at::Tensor& x, const at::Tensor& bias, const c10::optional<at::Tensor>& group_idx,
                            int64_t group_idx_type, const c10::optional<at::Tensor>& probs) {
  constexpr const char* op = "grouped_bias_add";
  check_one_device(op, {{"x", x},
                        {"bias", bias},
                        {"group_idx", group_idx.has_value() ? *group_idx : at::Tensor()},
                        {"probs", probs.has_value() ? *probs : at::Tensor()}});
  check_same_device(op, "bias", bias, "x", x);
  check_float(op, "x", x);
  check_same_dtype(op, "bias", bias, "x", x);
  const c10::SymInt groups = check_grouping(op, "x", x, group_idx, group_idx_type);
  if (group_idx.has_value()) {
    NPU_EXT_CHECK(bias.dim() == 2 && bias.sym_size(0) == groups && bias.sym_size(1) == x.sym_size(1), op,
                  "bias must have shape (G, H) = [", groups, ", ", x.sym_size(1),
                  "] (G = group_idx.numel(), H = x.size(1)), but got ", shape_str(bias.sym_sizes()));
  } else {
    const bool ok2 = bias.dim() == 2 && bias.sym_size(0) == x.sym_size(0) && bias.sym_size(1) == x.sym_size(2);
    const bool ok3 = bias.dim() == 3 && bias.sym_size(0) == x.sym_size(0) && bias.sym_size(1) == 1 &&
                     bias.sym_size(2) == x.sym_size(2);
    NPU_EXT_CHECK(ok2 || ok3, op, "bias must have shape (G, H) = [", x.sym_size(0), ", ", x.sym_size(2),
                  "] or (G, 1, H) when group_idx is None, but got ", shape_str(bias.sym_sizes()));
  }
  if (probs.has_value()) {
    const at::Tensor& p = *probs;
    check_same_device(op, "probs", p, "x", x);
    check_float(op, "probs", p);
    const c10::SymIntArrayRef rows = x.sym_sizes().slice(0, x.dim() - 1);  // one weight per row of x
    std::vector<c10::SymInt> rows1 = rows.vec();
    rows1.emplace_back(1);
    NPU_EXT_CHECK(p.sym_sizes() == rows || p.sym_sizes() == c10::SymIntArrayRef(rows1), op, "probs must have shape ",
                  shape_str(rows), " or ", shape_str(rows1), " (one weight per row of x), but got ",
                  shape_str(p.sym_sizes()));
  }
}

// ---------------------------------------------------------------------------------------------------------
void check_out(const char* op, const char* name, const at::Tensor& out, c10::SymIntArrayRef shape,
               at::ScalarType dtype, const at::Tensor& like) {
  check_same_device(op, name, out, "the inputs", like);
  NPU_EXT_CHECK(out.scalar_type() == dtype, op, "output ", name, " must have dtype ", dtype_name(dtype),
                ", but got ", dtype_name(out.scalar_type()));
  NPU_EXT_CHECK(out.sym_sizes() == shape, op, "output ", name, " must have shape ", shape_str(shape), ", but got ",
                shape_str(out.sym_sizes()));
  // Several elements of `out` at one address (e.g. an expanded tensor) cannot each hold a different result.
  NPU_EXT_CHECK(out.unsafeGetTensorImpl()->has_symbolic_sizes_strides() ||
                    at::has_internal_overlap(out) != at::MemOverlap::Yes,
                op, "output ", name, " must not have internally overlapping memory (e.g. an expanded tensor)");
}

void check_out(const char* op, const char* name, const at::Tensor& out, const OutputSpec& spec,
               const at::Tensor& like) {
  check_out(op, name, out, spec.shape, spec.dtype, like);
}

at::Tensor new_output(const OutputSpec& spec, const at::Tensor& like) {
  return at::empty_symint(spec.shape, like.options().dtype(spec.dtype));
}

}  // namespace npu_ext
