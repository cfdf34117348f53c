// Run-time dispatch to the per-ISA CPU kernels. Compiled without ISA flags (see dispatch.h).
#include "cpu/dispatch.h"

#include <ATen/Version.h>
#include <torch/library.h>

#include <string>

namespace npu_ext {
namespace cpu {
namespace {

bool cpu_has_avx2() {
#if defined(NPU_EXT_X86_VARIANTS)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(NPU_EXT_X86_VARIANTS)
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#else
  return false;
#endif
}

// ATen's capability (x86: "DEFAULT", "AVX2", "AVX512"; aarch64: "DEFAULT", "SVE128", "SVE256"; set by
// ATEN_CPU_CAPABILITY), lowered to the best variant this build has and this CPU runs. Builds for other
// architectures than x86-64 (setup.py) have the DEFAULT variant only, which is NEON code on aarch64.
Isa compute_isa() {
  const std::string aten = at::get_cpu_capability();
  Isa isa = aten == "AVX512" ? Isa::AVX512 : aten == "AVX2" ? Isa::AVX2 : Isa::DEFAULT;
  if (isa == Isa::AVX512 && !cpu_has_avx512()) isa = Isa::AVX2;
  if (isa == Isa::AVX2 && !cpu_has_avx2()) isa = Isa::DEFAULT;
  return isa;
}

std::string cpu_capability_op() { return isa_name(selected_isa()); }

}  // namespace

Isa selected_isa() {
  static const Isa isa = compute_isa();
  return isa;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::AVX512:
      return "AVX512";
    case Isa::AVX2:
      return "AVX2";
    default:
      return "DEFAULT";
  }
}

#if defined(NPU_EXT_X86_VARIANTS)
#define NPU_EXT_CPU_DISPATCH(fn, ...)      \
  switch (selected_isa()) {                \
    case Isa::AVX512:                      \
      return AVX512::fn(__VA_ARGS__);      \
    case Isa::AVX2:                        \
      return AVX2::fn(__VA_ARGS__);        \
    default:                               \
      return DEFAULT::fn(__VA_ARGS__);     \
  }
#else
#define NPU_EXT_CPU_DISPATCH(fn, ...) return DEFAULT::fn(__VA_ARGS__);
#endif

void gelu_backward_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate) {
  NPU_EXT_CPU_DISPATCH(gelu_backward_kernel, iter, approximate);
}

void logit_grad_kernel(at::TensorIteratorBase& iter, double eps) {
  NPU_EXT_CPU_DISPATCH(logit_grad_kernel, iter, eps);
}

void prelu_backward_kernel(const at::Tensor& g, const at::Tensor& x, const at::Tensor& w, const at::Tensor& grad_input,
                           const at::Tensor& grad_weight, int64_t outer, int64_t channels, int64_t inner) {
  NPU_EXT_CPU_DISPATCH(prelu_backward_kernel, g, x, w, grad_input, grad_weight, outer, channels, inner);
}

void grouped_bias_add_grad_kernel(const at::Tensor& grad_y, const GroupedRows& layout, const at::Tensor& out) {
  NPU_EXT_CPU_DISPATCH(grouped_bias_add_grad_kernel, grad_y, layout, out);
}

void scaled_masked_softmax_backward_kernel(const at::Tensor& g, const at::Tensor& y, const at::Tensor& mask,
                                           double scale, bool causal, const at::Tensor& out) {
  NPU_EXT_CPU_DISPATCH(scaled_masked_softmax_backward_kernel, g, y, mask, scale, causal, out);
}

void scaled_masked_softmax_kernel(const at::Tensor& x, const at::Tensor& mask, double scale, bool causal,
                                  bool zero_fully_masked, const at::Tensor& out) {
  NPU_EXT_CPU_DISPATCH(scaled_masked_softmax_kernel, x, mask, scale, causal, zero_fully_masked, out);
}

void grouped_bias_add_kernel(const at::Tensor& x, const GroupedRows& layout, const at::Tensor& bias,
                             int64_t bias_row_stride, int64_t bias_col_stride, const at::Tensor& probs,
                             const at::Tensor& out) {
  NPU_EXT_CPU_DISPATCH(grouped_bias_add_kernel, x, layout, bias, bias_row_stride, bias_col_stride, probs, out);
}

void gelu_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate) {
  NPU_EXT_CPU_DISPATCH(gelu_kernel, iter, approximate);
}

#undef NPU_EXT_CPU_DISPATCH

}  // namespace cpu

// torch.ops.npu_ext._cpu_capability(): the kernel variant this process runs ("DEFAULT", "AVX2", "AVX512").
TORCH_LIBRARY_IMPL(npu_ext, CompositeExplicitAutograd, m) {
  m.impl("_cpu_capability", &cpu::cpu_capability_op);
}

}  // namespace npu_ext
