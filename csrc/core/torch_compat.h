// Every difference between the torch releases the package builds against (torch 2.6 to 2.14) that the C++ of
// _C needs, in one place. The op, kernel and autograd files use only what this header defines; none of them
// tests a torch version itself. (The torch_npu differences of _C_npu are in npu/torch_npu_compat.h; the Python
// ones in torch_ext/_compat.py.)
//
//   autograd nodes  torch 2.13 made autograd's graph nodes intrusive (torch::autograd::set_history and Node's
//                   edges take c10::intrusive_ptr<Node>); up to 2.12 they are std::shared_ptr<Node>, created with
//                   torch::autograd::deleteNode as the deleter (as ATen's generated code does), so a deep graph is
//                   released without recursion. NodePtr<N> and new_node<N>() are whichever the running torch
//                   takes: the nodes are the same classes and the graph the same on every release.
//   fnmadd          at::vec::fnmadd (c - a * b, one rounding where the variant has an FMA) exists from torch 2.9.
//                   Before, it is fmadd(-a, b, c): the negation is exact, so the result is the same bits, fused
//                   wherever at::vec::fmadd is (AVX2, AVX512, NEON) and two roundings in the generic code, as
//                   2.9's own generic fnmadd.
//
// Which half a source gets follows what it is: a kernel source (compiled once per ISA variant, CPU_CAPABILITY
// defined) gets the vectorized helpers and never the autograd headers, which would cost every variant's compile
// time; every other source gets the autograd part.
#pragma once

#include <torch/version.h>

#define NPU_EXT_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

#if defined(CPU_CAPABILITY)

#include <ATen/cpu/vec/vec.h>

namespace npu_ext {
namespace compat {

template <typename V>
inline V fnmadd(const V& a, const V& b, const V& c) {
#if NPU_EXT_TORCH_AT_LEAST(2, 9)
  return at::vec::fnmadd(a, b, c);
#else
  return at::vec::fmadd(a.neg(), b, c);
#endif
}

}  // namespace compat
}  // namespace npu_ext

#else  // not a kernel source

#include <torch/csrc/autograd/function.h>

#include <memory>

namespace npu_ext {
namespace compat {

#if NPU_EXT_TORCH_AT_LEAST(2, 13)
template <typename N>
using NodePtr = c10::intrusive_ptr<N>;

template <typename N>
NodePtr<N> new_node() {
  return c10::make_intrusive<N>();
}
#else
template <typename N>
using NodePtr = std::shared_ptr<N>;

template <typename N>
NodePtr<N> new_node() {
  return NodePtr<N>(new N(), torch::autograd::deleteNode);
}
#endif

}  // namespace compat
}  // namespace npu_ext

#endif  // CPU_CAPABILITY
