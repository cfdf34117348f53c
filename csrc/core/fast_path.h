// The eager fast path of the torch_ext functional API (torch_ext._C._gelu & co.): a function of the Python module
// torch_ext._C per forward op that converts its arguments and makes one unboxed dispatcher call of the op, as
// PyTorch's own generated bindings do, instead of the boxed torch.ops path (~2 us less per call). Dispatch is the
// same (autograd, autocast, modes and tracing all happen in the dispatcher); torch_ext/functional.py uses torch.ops
// instead while compiling or when __torch_function__ is involved.
//
// An operator family declares its binding in one line, in its library.cpp:
//   NPU_EXT_FAST_PATH("_gelu", "npu_ext::gelu", at::Tensor(const at::Tensor&, c10::string_view))
// and core/python_module.cpp puts every declared binding into the module.
#pragma once

#include <Python.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/python_variable.h>

#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/macros/Macros.h>

#include <cstdint>
#include <tuple>
#include <type_traits>
#include <utility>

namespace npu_ext {
namespace fast_path {

using Function = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t);

// Adds a function to torch_ext._C (at load time, before the module is made).
bool add(const char* name, Function fn);

// Every function added, as the module's method table (terminated by a null entry).
PyMethodDef* methods();

template <typename Sig>
c10::TypedOperatorHandle<Sig> find(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Sig>();
}

// One Python argument as the C++ type of the op's schema (a TypeError naming the function and the argument's
// position when it is not one).
template <typename T>
struct Arg;

template <>
struct Arg<const at::Tensor&> {
  using Stored = at::Tensor;
  static at::Tensor from(PyObject* o, const char* fn, int i) {
    TORCH_CHECK_TYPE(THPVariable_Check(o), fn, ": argument ", i, " must be a Tensor");
    return THPVariable_Unpack(o);
  }
};

template <>
struct Arg<const c10::optional<at::Tensor>&> {
  using Stored = c10::optional<at::Tensor>;
  static Stored from(PyObject* o, const char* fn, int i) {
    if (o == Py_None) return c10::nullopt;
    return Arg<const at::Tensor&>::from(o, fn, i);
  }
};

// A str as a view of its UTF-8 bytes (owned by the str object, which the caller keeps alive for the call).
template <>
struct Arg<c10::string_view> {
  using Stored = c10::string_view;
  static Stored from(PyObject* o, const char*, int) {
    Py_ssize_t len = 0;
    const char* s = PyUnicode_AsUTF8AndSize(o, &len);
    if (s == nullptr) throw python_error();
    return c10::string_view(s, static_cast<size_t>(len));
  }
};

template <>
struct Arg<double> {
  using Stored = double;
  static Stored from(PyObject* o, const char*, int) {
    const double v = PyFloat_AsDouble(o);
    if (v == -1.0 && PyErr_Occurred()) throw python_error();
    return v;
  }
};

template <>
struct Arg<c10::optional<double>> {
  using Stored = c10::optional<double>;
  static Stored from(PyObject* o, const char* fn, int i) {
    if (o == Py_None) return c10::nullopt;
    return Arg<double>::from(o, fn, i);
  }
};

template <>
struct Arg<bool> {
  using Stored = bool;
  static Stored from(PyObject* o, const char*, int) {
    const int v = PyObject_IsTrue(o);
    if (v < 0) throw python_error();
    return v != 0;
  }
};

template <>
struct Arg<int64_t> {
  using Stored = int64_t;
  static Stored from(PyObject* o, const char*, int) {
    const long long v = PyLong_AsLongLong(o);
    if (v == -1 && PyErr_Occurred()) throw python_error();
    return static_cast<int64_t>(v);
  }
};

// Releases the GIL for the op call (Python kernels, e.g. autocast or double backward, take it back).
struct NoGil {
  PyThreadState* s = PyEval_SaveThread();
  ~NoGil() { PyEval_RestoreThread(s); }
};

// Converts the n arguments and calls op without the GIL; its (single tensor) result wrapped for Python.
template <typename... A, size_t... I>
PyObject* call(const char* fn, const c10::TypedOperatorHandle<at::Tensor(A...)>& op, PyObject* const* args,
               Py_ssize_t n, std::index_sequence<I...>) {
  TORCH_CHECK_TYPE(n == static_cast<Py_ssize_t>(sizeof...(A)), fn, " takes ", sizeof...(A), " arguments, but got ", n);
  std::tuple<typename Arg<A>::Stored...> converted{Arg<A>::from(args[I], fn, static_cast<int>(I) + 1)...};
  at::Tensor out;
  {
    NoGil g;
    out = op.call(std::get<I>(converted)...);
  }
  return THPVariable_Wrap(std::move(out));
}

template <typename... A>
PyObject* call(const char* fn, const c10::TypedOperatorHandle<at::Tensor(A...)>& op, PyObject* const* args,
               Py_ssize_t n) {
  return call(fn, op, args, n, std::index_sequence_for<A...>{});
}

}  // namespace fast_path
}  // namespace npu_ext

// NPU_EXT_FAST_PATH("_gelu", "npu_ext::gelu", <the op's C++ signature>): torch_ext._C._gelu(*args).
#define NPU_EXT_FAST_PATH(py_name, op_name, ...)                                                                 \
  static const bool C10_ANONYMOUS_VARIABLE(npu_ext_fast_path_) = ::npu_ext::fast_path::add(                     \
      py_name, [](PyObject*, PyObject* const* args, Py_ssize_t n) -> PyObject* {                                 \
        HANDLE_TH_ERRORS                                                                                         \
        static const auto op = ::npu_ext::fast_path::find<__VA_ARGS__>(op_name);                                 \
        return ::npu_ext::fast_path::call(py_name, op, args, n);                                                 \
        END_HANDLE_TH_ERRORS                                                                                     \
      });
