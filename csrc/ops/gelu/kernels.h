// The CPU kernels of gelu and gelu_backward_v2 (kernel_*.cpp, one object per ISA variant: core/cpu/isa.h).
//
// gelu_kernel           iter: output out, input self, of one dtype. out = gelu(self) in fp32 (fp64 for fp64).
// gelu_backward_kernel  iter: output grad_input, inputs (grad_output, self), all of one dtype.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/TensorIterator.h>

#include <cstdint>

#include "core/cpu/isa.h"
#include "ops/gelu/checks.h"

namespace npu_ext {
namespace cpu {

NPU_EXT_DECLARE_KERNEL(void gelu_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate))
NPU_EXT_DECLARE_KERNEL(void gelu_backward_kernel(at::TensorIteratorBase& iter, GeluApproximate approximate))

}  // namespace cpu
}  // namespace npu_ext
