// Run-time choice of the CPU kernel variant (DEFAULT, AVX2 or AVX512; see csrc/cpu/kernels/kernels.h).
//
// This file and dispatch.cpp are compiled WITHOUT ISA flags. The variant is chosen once per process, like
// ATen's own kernels: ATen's CPU capability (which honours the ATEN_CPU_CAPABILITY environment variable:
// default, avx2, avx512), lowered further if this CPU lacks an instruction set the variant was compiled for,
// so a forced variant can never raise an illegal instruction.
#pragma once

#include "cpu/kernels/kernels.h"

namespace npu_ext {
namespace cpu {

enum class Isa { DEFAULT = 0, AVX2 = 1, AVX512 = 2 };

Isa selected_isa();
const char* isa_name(Isa isa);

// The dispatching entry points the op files call; same contracts as the kernels in kernels.h.
NPU_EXT_DECLARE_CPU_KERNELS

}  // namespace cpu
}  // namespace npu_ext
