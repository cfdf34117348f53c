#include "core/checks.h"

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <sstream>
#include <string>

namespace npu_ext {

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

bool same_sizes(const at::Tensor& a, const at::Tensor& b) {
  if (!a.unsafeGetTensorImpl()->has_symbolic_sizes_strides() && !b.unsafeGetTensorImpl()->has_symbolic_sizes_strides()) {
    return a.sizes() == b.sizes();
  }
  return a.sym_sizes() == b.sym_sizes();
}

// NumPy broadcasting of two shapes; false when they do not broadcast.
bool broadcast_shapes(c10::SymIntArrayRef a, c10::SymIntArrayRef b, std::vector<c10::SymInt>& out) {
  const size_t n = std::max(a.size(), b.size());
  const auto ai = c10::asIntArrayRefSlowOpt(a), bi = c10::asIntArrayRefSlowOpt(b);
  if (ai.has_value() && bi.has_value()) {  // real tensors: the same rule on plain integers (no SymInt arithmetic)
    if (*ai == *bi) {
      out.assign(a.begin(), a.end());
      return true;
    }
    out.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t da = i < n - ai->size() ? 1 : (*ai)[i - (n - ai->size())];
      const int64_t db = i < n - bi->size() ? 1 : (*bi)[i - (n - bi->size())];
      if (da != db && da != 1 && db != 1) return false;
      out[i] = c10::SymInt(da == 1 ? db : da);
    }
    return true;
  }
  out.assign(n, c10::SymInt(1));
  for (size_t i = 0; i < n; ++i) {
    const c10::SymInt da = i < n - a.size() ? c10::SymInt(1) : a[i - (n - a.size())];
    const c10::SymInt db = i < n - b.size() ? c10::SymInt(1) : b[i - (n - b.size())];
    if (da != db && da != 1 && db != 1) return false;
    out[i] = da == 1 ? db : da;
  }
  return true;
}

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

LikeMeta like_spec(const at::Tensor& t) { return {OutputSpec{t.sym_sizes().vec(), t.scalar_type()}}; }

at::Tensor like_output(const at::Tensor& t) { return at::empty_symint(t.sym_sizes(), t.options()); }

}  // namespace npu_ext