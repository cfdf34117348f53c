// The CPU kernels of logit_grad (kernel_*.cpp, one object per ISA variant: core/cpu/isa.h).
//
// logit_grad_kernel     iter: output dx, inputs (x, dy), all of one dtype. (logit itself is ATen's: cpu.cpp.)
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>

#include "core/cpu/isa.h"
#include "ops/logit/checks.h"

namespace npu_ext {
namespace cpu {

NPU_EXT_DECLARE_KERNEL(void logit_grad_kernel(at::TensorIteratorBase& iter, double eps))

}  // namespace cpu
}  // namespace npu_ext
