// npu_ext::gelu on CPU: the ATen composite (at::gelu_out is already a vectorized fp32-opmath kernel).
#include <torch/library.h>

#include "common/forward_composite.h"

namespace npu_ext {

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("gelu", &composite::gelu); }

}  // namespace npu_ext
