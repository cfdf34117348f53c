// The Python module torch_ext._C. Importing it loads the shared library, whose static initialisers register
// the npu_ext schemas (schemas.cpp) and the per-device kernels with the dispatcher.
//
// It also exports the eager fast path of the torch_ext functional API (_gelu, _prelu, _logit,
// _scaled_masked_softmax, _grouped_bias_add): each converts its arguments and makes one unboxed dispatcher call
// of the op, as PyTorch's own generated bindings do, instead of the boxed torch.ops path (~2 us less per call).
// Dispatch is the same (autograd, autocast, modes, tracing all happen in the dispatcher); torch_ext/functional.py
// uses torch.ops instead while compiling or when __torch_function__ is involved.
#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

namespace {

template <typename Sig>
c10::TypedOperatorHandle<Sig> find(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// Releases the GIL for the op call (Python kernels, e.g. autocast or double backward, take it back).
struct NoGil {
  PyThreadState* s = PyEval_SaveThread();
  ~NoGil() { PyEval_RestoreThread(s); }
};

// One unboxed call of `op` without the GIL, its result wrapped for Python.
template <typename Sig, typename... Args>
PyObject* call_op(const c10::TypedOperatorHandle<Sig>& op, Args&&... args) {
  at::Tensor out;
  {
    NoGil g;
    out = op.call(std::forward<Args>(args)...);
  }
  return THPVariable_Wrap(std::move(out));
}

const at::Tensor& tensor_arg(PyObject* o, const char* what) {
  TORCH_CHECK_TYPE(THPVariable_Check(o), what, " must be a Tensor");
  return THPVariable_Unpack(o);
}

// A Python str argument as a string_view of its UTF-8 bytes (owned by the str object, which the caller keeps
// alive for the call); false with a Python error set when it is not a str.
bool str_arg(PyObject* o, c10::string_view& out) {
  Py_ssize_t len = 0;
  const char* s = PyUnicode_AsUTF8AndSize(o, &len);
  if (s == nullptr) return false;
  out = c10::string_view(s, static_cast<size_t>(len));
  return true;
}

c10::optional<at::Tensor> optional_tensor_arg(PyObject* o, const char* what) {
  if (o == Py_None) return c10::nullopt;
  return tensor_arg(o, what);
}

PyObject* fast_gelu(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(n == 2, "_gelu(input, approximate)");
  const at::Tensor& x = tensor_arg(args[0], "input");
  c10::string_view approximate;
  if (!str_arg(args[1], approximate)) return nullptr;
  static const auto op = find<at::Tensor(const at::Tensor&, c10::string_view)>("npu_ext::gelu");
  return call_op(op, x, approximate);
  END_HANDLE_TH_ERRORS
}

PyObject* fast_prelu(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(n == 2, "_prelu(input, weight)");
  const at::Tensor& x = tensor_arg(args[0], "input");
  const at::Tensor& w = tensor_arg(args[1], "weight");
  static const auto op = find<at::Tensor(const at::Tensor&, const at::Tensor&)>("npu_ext::prelu");
  return call_op(op, x, w);
  END_HANDLE_TH_ERRORS
}

PyObject* fast_logit(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(n == 2, "_logit(input, eps)");
  const at::Tensor& x = tensor_arg(args[0], "input");
  c10::optional<double> eps;
  if (args[1] != Py_None) {
    const double e = PyFloat_AsDouble(args[1]);
    if (e == -1.0 && PyErr_Occurred()) return nullptr;
    eps = e;
  }
  static const auto op = find<at::Tensor(const at::Tensor&, c10::optional<double>)>("npu_ext::logit");
  return call_op(op, x, eps);
  END_HANDLE_TH_ERRORS
}

PyObject* fast_scaled_masked_softmax(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(n == 5, "_scaled_masked_softmax(x, mask, scale, fix_triu_mask, fully_masked)");
  const at::Tensor& x = tensor_arg(args[0], "x");
  const at::Tensor& mask = tensor_arg(args[1], "mask");
  const double scale = PyFloat_AsDouble(args[2]);
  if (scale == -1.0 && PyErr_Occurred()) return nullptr;
  const int fix = PyObject_IsTrue(args[3]);
  if (fix < 0) return nullptr;
  c10::string_view fully_masked;
  if (!str_arg(args[4], fully_masked)) return nullptr;
  static const auto op =
      find<at::Tensor(const at::Tensor&, const at::Tensor&, double, bool, c10::string_view)>("npu_ext::scaled_masked_softmax");
  return call_op(op, x, mask, scale, fix != 0, fully_masked);
  END_HANDLE_TH_ERRORS
}

PyObject* fast_grouped_bias_add(PyObject*, PyObject* const* args, Py_ssize_t n) {
  HANDLE_TH_ERRORS
  TORCH_CHECK_TYPE(n == 5, "_grouped_bias_add(x, bias, group_idx, group_idx_type, probs)");
  const at::Tensor& x = tensor_arg(args[0], "x");
  const at::Tensor& bias = tensor_arg(args[1], "bias");
  const c10::optional<at::Tensor> group_idx = optional_tensor_arg(args[2], "group_idx");
  const long long type = PyLong_AsLongLong(args[3]);
  if (type == -1 && PyErr_Occurred()) return nullptr;
  const c10::optional<at::Tensor> probs = optional_tensor_arg(args[4], "probs");
  static const auto op = find<at::Tensor(const at::Tensor&, const at::Tensor&, const c10::optional<at::Tensor>&, int64_t,
                                         const c10::optional<at::Tensor>&)>("npu_ext::grouped_bias_add");
  return call_op(op, x, bias, group_idx, static_cast<int64_t>(type), probs);
  END_HANDLE_TH_ERRORS
}

PyMethodDef methods[] = {
    {"_gelu", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_gelu)), METH_FASTCALL, nullptr},
    {"_prelu", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_prelu)), METH_FASTCALL, nullptr},
    {"_logit", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_logit)), METH_FASTCALL, nullptr},
    {"_scaled_masked_softmax",
     reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_scaled_masked_softmax)), METH_FASTCALL,
     nullptr},
    {"_grouped_bias_add", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(fast_grouped_bias_add)),
     METH_FASTCALL, nullptr},
    {nullptr, nullptr, 0, nullptr}};

}  // namespace

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, methods};
  return PyModule_Create(&module_def);
}
}
