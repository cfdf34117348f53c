// npu_ext::prelu on CPU: the ATen composite (at::prelu).
#include <torch/library.h>

#include "common/forward_composite.h"

namespace npu_ext {

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("prelu", &composite::prelu); }

}  // namespace npu_ext
