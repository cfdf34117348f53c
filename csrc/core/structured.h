// One output specification per backward op, from which every backend's functional, `.out` and Meta kernels are
// derived (as ATen's structured kernels derive theirs from one meta function).
//
// Every op declares, beside its check (csrc/ops/<family>/checks.h), a specification `Op`:
//
//   struct GeluBackwardV2Op {
//     static constexpr const char* kName = "gelu_backward_v2";                   // its .out overload: kName.out
//     static constexpr std::array<const char*, 1> kOutputs{"grad_input"};          // the .out keyword names
//     static GeluBackwardMeta check(<the functional's arguments, as the schema's C++ types>);  // validate, infer
//     static std::array<const OutputSpec*, 1> outputs(const GeluBackwardMeta& m);   // each output's spec
//   };
//
// The functional's signature is check's arguments returning one tensor per output (a tensor, or a tuple of two). A
// forward op derives from ForwardOp (core/checks.h): one output like its input (its check returns like_spec(input)),
// no .out overload.
//
// and a backend registers both overloads from what it computes, `structured::impl<Op, Impl>(m)`, where Impl is
//   - `Impl::run(meta, outs, args...)`: writes the outputs `outs` (a std::array of tensors, allocated from the
//     specs for the functional overload, the caller's checked tensors for `.out`): the CPU and NPU kernels;
//     `structured::OutputsOnly` writes nothing (the Meta kernels);
//   - or `Impl::compute(meta, args...)`: returns the functional result, which `.out` copies into the caller's
//     tensors: the composites (`structured::Returns<fn>`, from a functional implementation);
// and optionally `Impl::check(args...)`, a backend's own check after the op's (the NPU path's dtype guard),
// `Impl::kDeviceGuard = true`: the inputs' device is made current before the outputs are made (the NPU path), and
// `Impl::new_output(spec, like)`: how the functional overload allocates an output (the NPU path: torch_npu's own
// allocation, npu::StructuredKernel; new_output, through the dispatcher, otherwise).
//
// Either way the sequence is the one every kernel of the op follows: the op's check, the backend's check, then for
// `.out` each output against its spec (shape, dtype, device, no internal overlap), for the functional overload new
// contiguous outputs on the inputs' device; then the work.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/DeviceGuard.h>
#include <torch/library.h>

#include <array>
#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/checks.h"

namespace npu_ext {
namespace structured {

// `guard` made to hold `device` current unless it is current already: a device guard always restores the device it
// found, and on torch_npu that restoring call (NPUGuardImpl::uncheckedSetDevice) costs about 900 host instructions
// even when the device never changed (benchmarks/npu_host_cost.py). The check is the guard's own first step
// (getDevice, which exchangeDevice calls too).
inline void make_current(c10::OptionalDeviceGuard& guard, c10::Device device) {
  if (device.has_index() && c10::impl::getDeviceGuardImpl(device.type())->getDevice() == device) return;
  guard.reset_device(device);
}

// The first tensor argument of a call: the device every output is made on and checked against (the op's check
// has already put every tensor argument on one device).
template <class T, class... Rest>
const at::Tensor& first_tensor(const T& t, const Rest&... rest) {
  if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) {
    return t;
  } else {
    return first_tensor(rest...);
  }
}

// A backend that computes nothing: the Meta kernels (checks, and outputs from the specs).
struct OutputsOnly {
  template <class Meta, class Outs, class... A>
  static void run(const Meta&, const Outs&, const A&...) {}
};

// A backend from a functional implementation that validates by itself (the composites): its functional overload is
// `Functional`, its `.out` overload copies `Functional`'s result into the caller's outputs.
template <auto Functional>
struct Returns {
  template <class Meta, class... A>
  static auto compute(const Meta&, const A&... a) {
    return Functional(a...);
  }
  static constexpr auto functional = Functional;
};

// The functional's C++ signature, from Op::check's arguments and the number of outputs.
template <class Check, std::size_t N>
struct SignatureOf;
template <class Meta, class... A, std::size_t N>
struct SignatureOf<Meta (*)(A...), N> {
  using type = std::conditional_t<N == 1, at::Tensor, std::tuple<at::Tensor, at::Tensor>>(A...);
};
template <class Op>
using signature_of = typename SignatureOf<decltype(&Op::check), Op::kOutputs.size()>::type;

template <class Op>
constexpr bool has_out() {
  if constexpr (requires { Op::kHasOut; }) {
    return Op::kHasOut;
  } else {
    return true;
  }
}

template <class Op, class Impl, class Sig = signature_of<Op>>
struct Kernels;

template <class Op, class Impl, class R, class... A>
struct Kernels<Op, Impl, R(A...)> {
  using Meta = decltype(Op::check(std::declval<A>()...));
  static constexpr std::size_t N = Op::kOutputs.size();
  using Outs = std::array<at::Tensor, N>;
  static_assert(N == 1 || N == 2, "structured: one or two outputs");

  static Meta check(A... a) {
    Meta meta = Op::check(a...);
    if constexpr (requires { Impl::check(a...); }) {
      Impl::check(a...);
    }
    return meta;
  }

  static R result(const Outs& outs) {
    if constexpr (N == 1) {
      return outs[0];
    } else {
      return R(outs[0], outs[1]);
    }
  }

  // The inputs' device made current where the backend asks for it (kDeviceGuard; make_current), else nothing.
  static void guard_device(c10::OptionalDeviceGuard& guard, const A&... a) {
    if constexpr (requires { Impl::kDeviceGuard; }) {
      if (Impl::kDeviceGuard) make_current(guard, first_tensor(a...).device());
    }
  }

  static R functional(A... a) {
    const Meta meta = check(a...);
    c10::OptionalDeviceGuard guard;
    guard_device(guard, a...);
    if constexpr (requires { Impl::compute(meta, a...); }) {
      return Impl::compute(meta, a...);
    } else {
      const auto specs = Op::outputs(meta);
      Outs outs;
      for (std::size_t i = 0; i < N; ++i) {
        if constexpr (requires { Impl::new_output(*specs[i], first_tensor(a...)); }) {
          outs[i] = Impl::new_output(*specs[i], first_tensor(a...));
        } else {
          outs[i] = new_output(*specs[i], first_tensor(a...));
        }
      }
      Impl::run(meta, outs, a...);
      return result(outs);
    }
  }

  static void out(const Outs& outs, A... a) {
    const Meta meta = check(a...);
    const auto specs = Op::outputs(meta);
    for (std::size_t i = 0; i < N; ++i) check_out(Op::kName, Op::kOutputs[i], outs[i], *specs[i], first_tensor(a...));
    c10::OptionalDeviceGuard guard;
    guard_device(guard, a...);
    if constexpr (requires { Impl::compute(meta, a...); }) {
      const R r = Impl::compute(meta, a...);
      if constexpr (N == 1) {
        outs[0].copy_(r);
      } else {
        outs[0].copy_(std::get<0>(r));
        outs[1].copy_(std::get<1>(r));
      }
    } else {
      Impl::run(meta, outs, a...);
    }
  }

  // The `.out` overload's signature: the functional's arguments, then the outputs (keyword-only in the schema).
  static void out1(A... a, const at::Tensor& o0) { out(Outs{o0}, a...); }
  static void out2(A... a, const at::Tensor& o0, const at::Tensor& o1) { out(Outs{o0, o1}, a...); }
};

// Registers Op's functional and `.out` overloads on the library's dispatch key, computed by Impl.
template <class Op, class Impl>
void impl(torch::Library& m) {
  using K = Kernels<Op, Impl>;
  if constexpr (requires { Impl::functional; }) {
    m.impl(Op::kName, Impl::functional);
  } else {
    m.impl(Op::kName, &K::functional);
  }
  if constexpr (has_out<Op>()) {
    const std::string out_name = std::string(Op::kName) + ".out";
    if constexpr (K::N == 1) {
      m.impl(out_name.c_str(), &K::out1);
    } else {
      m.impl(out_name.c_str(), &K::out2);
    }
  }
}

}  // namespace structured
}  // namespace npu_ext

// An op's Meta kernels (its check, outputs from its specs, nothing computed), in its family's library.cpp.
#define NPU_EXT_META(Op) \
  TORCH_LIBRARY_IMPL(npu_ext, Meta, m) { ::npu_ext::structured::impl<Op, ::npu_ext::structured::OutputsOnly>(m); }

// An op's composite kernels on CompositeExplicitAutograd, from its functional composite `fn` (the .out overload
// copies its result), in its family's composite.cpp. torch_ext._C_npu compiles the composites to call them where
// aclnn's kernel is missing, and registers nothing (NPU_EXT_NPU_MODULE): torch_ext._C does.
#if defined(NPU_EXT_NPU_MODULE)
#define NPU_EXT_COMPOSITE(Op, fn)
#else
#define NPU_EXT_COMPOSITE(Op, fn)                                                                   \
  TORCH_LIBRARY_IMPL(npu_ext, CompositeExplicitAutograd, m) {                                       \
    ::npu_ext::structured::impl<Op, ::npu_ext::structured::Returns<&fn>>(m);                        \
  }
#endif
