// Vector helpers for the kernel sources. Included only by the kernel sources
// (csrc/ops/<family>/kernel_*.cpp), which are compiled once per ISA variant: everything here lives in
// npu_ext::cpu::CPU_CAPABILITY and uses only at::vec functions of
// at::vec::CPU_CAPABILITY (never at::vec's non-namespaced inline templates such as convert_to_float, which
// would be shared between the variants by the linker).
//
// One header per concern, each including the one before it:
//   vec/base.h     lane types and traits, the variant's ISA headers
//   vec/convert.h  fp16 / bf16 <-> fp32 conversions
//   vec/pack.h     Pack (opmath vectors of one Vectorized) and the store loops
//   vec/lanes.h    rounding to 16 bits, comparison masks, blend
//   vec/math.h     fused-operation helpers, fast_exp2, normal_tail, selects, reciprocals
//   vec/rows.h     bool masks, dense rows, horizontal sums
//   vec/loops.h    the elementwise TensorIterator loops
#pragma once

#include "core/cpu/vec/loops.h"
