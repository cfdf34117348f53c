// The CPU kernel variant this process runs (see isa.h), and torch.ops.npu_ext._cpu_capability() that reports it.
// Compiled without ISA flags.
#include "core/cpu/isa.h"

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


}  // namespace cpu

// torch.ops.npu_ext._cpu_capability(): the kernel variant this process runs ("DEFAULT", "AVX2", "AVX512").
TORCH_LIBRARY_FRAGMENT(npu_ext, m) { m.def("_cpu_capability() -> str"); }

TORCH_LIBRARY_IMPL(npu_ext, CompositeExplicitAutograd, m) {
  m.impl("_cpu_capability", &cpu::cpu_capability_op);
}

}  // namespace npu_ext
