// The Python module torch_ext._C. It exports nothing: importing it loads the shared library, whose static
// initialisers register the npu_ext schemas (schemas.cpp) and the per-device kernels with the dispatcher.
#include <Python.h>

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}
