// The Python module torch_ext._C_npu (built by setup.py only when torch_npu is installed). It exports nothing:
// importing it loads the shared library, whose static initialisers register the npu_ext PrivateUse1 (NPU)
// kernels of the other csrc/npu sources.
#include <Python.h>

extern "C" {
PyObject* PyInit__C_npu(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C_npu", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}
