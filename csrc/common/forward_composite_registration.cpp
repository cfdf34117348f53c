// The forward composites (forward_composite.cpp) registered on CompositeExplicitAutograd, in torch_ext._C only:
// torch_ext._C_npu compiles the composites too, to call them where an NPU kernel is unavailable, but must not
// register them a second time.
#include <torch/library.h>

#include "common/forward_composite.h"

namespace npu_ext {

TORCH_LIBRARY_IMPL(npu_ext, CompositeExplicitAutograd, m) {
  m.impl("gelu", &composite::gelu);
  m.impl("prelu", &composite::prelu);
  m.impl("logit", &composite::logit);
  m.impl("scaled_masked_softmax", &composite::scaled_masked_softmax);
  m.impl("grouped_bias_add", &composite::grouped_bias_add);
}

}  // namespace npu_ext
