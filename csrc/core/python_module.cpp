// The Python module torch_ext._C. Importing it loads the shared library, whose static initialisers register the
// npu_ext schemas (csrc/ops/<family>/library.cpp) and the per-device kernels with the dispatcher, and declare the
// eager fast path of each forward op (core/fast_path.h), which this module exports.
#include "core/fast_path.h"

#include <vector>

namespace npu_ext {
namespace fast_path {
namespace {

std::vector<PyMethodDef>& table() {
  static std::vector<PyMethodDef> t;
  return t;
}

}  // namespace

bool add(const char* name, Function fn) {
  table().push_back({name, reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fn)), METH_FASTCALL, nullptr});
  return true;
}

PyMethodDef* methods() {
  static std::vector<PyMethodDef> done = [] {
    std::vector<PyMethodDef> t = table();
    t.push_back({nullptr, nullptr, 0, nullptr});
    return t;
  }();
  return done.data();
}

}  // namespace fast_path
}  // namespace npu_ext

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, npu_ext::fast_path::methods()};
  return PyModule_Create(&module_def);
}
}
