// The CPU kernels' ISA variants: how an operator declares its kernels once for every variant, and how its op code
// (compiled without ISA flags) calls the variant this process runs.
//
// Every csrc/ops/<family>/kernel_*.cpp is compiled once per entry of setup.py's ISA_VARIANTS (DEFAULT, AVX2 and
// AVX512 on x86-64, where NPU_EXT_X86_VARIANTS is defined; DEFAULT alone elsewhere, which is NEON code on
// aarch64), each time with CPU_CAPABILITY set to the variant's name and the matching -m flags, and defines its
// kernels in namespace npu_ext::cpu::<CPU_CAPABILITY>. Nothing outside those namespaces may be defined in a kernel
// source (no registration, no globals with dynamic initialisers, no inline function of a namespace the other
// sources share): code compiled with -mavx512f must only ever run after selected_isa() (isa.cpp, compiled without
// ISA flags) has checked the CPU.
//
// The variant is chosen once per process, like ATen's own kernels: ATen's CPU capability (which honours the
// ATEN_CPU_CAPABILITY environment variable: default, avx2, avx512), lowered further if this CPU lacks an
// instruction set the variant was compiled for, so a forced variant can never raise an illegal instruction.
//
// Contract shared by every kernel: 16-bit inputs are computed in fp32 and rounded once to the output dtype (except
// prelu_backward's grad_weight, whose terms are rounded to the dtype before they are summed, as on the NPU);
// reductions accumulate in fp32 (fp64 for fp64) over a partition of the problem that depends only on its shape,
// never on the thread count, and every element goes through the same vector code (partial vectors for tails), so
// results are bitwise identical for any number of threads. A kernel only ever sees a valid, non-empty problem.
#pragma once

namespace npu_ext {
namespace cpu {

enum class Isa { DEFAULT = 0, AVX2 = 1, AVX512 = 2 };

Isa selected_isa();
const char* isa_name(Isa isa);

}  // namespace cpu
}  // namespace npu_ext

// NPU_EXT_DECLARE_KERNEL(void name(args...)): declares a kernel in every variant's namespace (inside namespace
// npu_ext::cpu, in the family's kernels.h).
// NPU_EXT_CPU_DISPATCH(name, args...): calls the variant of `name` this process runs (a statement, in op code).
#if defined(NPU_EXT_X86_VARIANTS)
#define NPU_EXT_DECLARE_KERNEL(...) \
  namespace DEFAULT {               \
  __VA_ARGS__;                      \
  }                                 \
  namespace AVX2 {                  \
  __VA_ARGS__;                      \
  }                                 \
  namespace AVX512 {                \
  __VA_ARGS__;                      \
  }
#define NPU_EXT_CPU_DISPATCH(fn, ...)                 \
  switch (::npu_ext::cpu::selected_isa()) {           \
    case ::npu_ext::cpu::Isa::AVX512:                 \
      ::npu_ext::cpu::AVX512::fn(__VA_ARGS__);        \
      break;                                          \
    case ::npu_ext::cpu::Isa::AVX2:                   \
      ::npu_ext::cpu::AVX2::fn(__VA_ARGS__);          \
      break;                                          \
    default:                                          \
      ::npu_ext::cpu::DEFAULT::fn(__VA_ARGS__);       \
  }
#else
#define NPU_EXT_DECLARE_KERNEL(...) \
  namespace DEFAULT {               \
  __VA_ARGS__;                      \
  }
#define NPU_EXT_CPU_DISPATCH(fn, ...) ::npu_ext::cpu::DEFAULT::fn(__VA_ARGS__)
#endif
