#include "ops/grouped_bias_add/checks.h"

#include <ATen/ATen.h>
#include <c10/util/irange.h>

#include <string>

namespace npu_ext {

namespace {

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

}  // namespace

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

}  // namespace npu_ext
