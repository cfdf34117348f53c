// npu_ext::_npu_status() -> str: what the NPU path will do on this machine, for `python -m torch_ext`
// (torch_ext/_config.py): the SoC, whether the CPU fallback is allowed, and per aclnn entry point whether it was
// found and what its kernel probe found on each device used so far. It exists only while the NPU sources are
// loaded (torch_ext._C_npu, or the host stand-in of the tests), so its schema is defined here rather than in
// csrc/schemas.cpp with the operators, which every build has.
#include <torch/library.h>

#include <string>

#include "core/npu/aclnn.h"

namespace npu_ext {
namespace {

std::string npu_status() { return npu::status_report(); }

}  // namespace

TORCH_LIBRARY_FRAGMENT(npu_ext, m) { m.def("_npu_status() -> str", &npu_status); }

}  // namespace npu_ext
