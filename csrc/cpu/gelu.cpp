// npu_ext::gelu on CPU: the ATen composite (fp32 at::gelu, one rounding for 16-bit inputs).
#include <torch/library.h>

#include "common/forward_composite.h"

namespace npu_ext {

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("gelu", &composite::gelu); }

}  // namespace npu_ext
