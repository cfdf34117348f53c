// npu_ext::logit on CPU: the ATen composite (fp32 at::logit, one rounding for 16-bit inputs).
#include <torch/library.h>

#include "common/forward_composite.h"

namespace npu_ext {

TORCH_LIBRARY_IMPL(npu_ext, CPU, m) { m.impl("logit", &composite::logit); }

}  // namespace npu_ext
