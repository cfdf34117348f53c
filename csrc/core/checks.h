// The validation every npu_ext operator shares: the conventions and the helpers each operator family's checks
// (csrc/ops/<family>/checks.h) are written with.
//
// Each family's checks are the single source of truth for "what is a valid call and what does it return". The CPU
// kernels, the Meta (fake) kernels, the composites and the NPU path all call them first, so an input is accepted or
// rejected identically on every device, with the same message, before any work is done.
//
// Every failure is a RuntimeError (TORCH_CHECK) whose message starts with "npu_ext.<op>: " and names the
// offending argument. Sizes are read as SymInts, so the same checks serve fake tensors with symbolic
// shapes (torch.compile, dynamic export) as well as real tensors.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/SymInt.h>
#include <c10/util/Optional.h>
#include <c10/util/string_view.h>

#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace npu_ext {

// aclnn's rank limit, shared by every operator.
constexpr int64_t kMaxRank = 8;

// The shape and dtype of one output. Each backward op's check returns the spec of every output, and the CPU,
// Meta and NPU kernels all allocate (new_output) and validate `.out` tensors (check_out) from it.
struct OutputSpec {
  std::vector<c10::SymInt> shape;
  at::ScalarType dtype;
};

// What a forward op's check infers: one output of its first tensor's shape and dtype (like_spec).
struct LikeMeta {
  OutputSpec out;
};
LikeMeta like_spec(const at::Tensor& t);

// The part every forward op's specification shares (core/structured.h): one output like its input, no .out overload.
struct ForwardOp {
  static constexpr bool kHasOut = false;
  static constexpr std::array<const char*, 1> kOutputs{"out"};
  static std::array<const OutputSpec*, 1> outputs(const LikeMeta& meta) { return {&meta.out}; }
};

// "npu_ext.<op>: <message>" as a RuntimeError when cond is false.
#define NPU_EXT_CHECK(cond, op, ...) TORCH_CHECK((cond), "npu_ext.", op, ": ", __VA_ARGS__)

// a.sym_sizes() == b.sym_sizes(), compared as plain integers when neither has symbolic sizes (every real tensor:
// no SymInt comparison per dimension on the call's host path).
bool same_sizes(const at::Tensor& a, const at::Tensor& b);

// "torch.float16", ...
std::string dtype_name(at::ScalarType t);
// "[2, 3]"
std::string shape_str(c10::SymIntArrayRef s);

// The argument checks every family uses; each message names the op and the argument.
void check_float(const char* op, const char* name, const at::Tensor& t);
void check_same_dtype(const char* op, const char* name, const at::Tensor& t, const char* ref_name,
                      const at::Tensor& ref);
void check_same_device(const char* op, const char* name, const at::Tensor& t, const char* ref_name,
                       const at::Tensor& ref);
void check_max_rank(const char* op, const char* name, const at::Tensor& t, int64_t max_rank);
void check_rank(const char* op, const char* name, const at::Tensor& t, int64_t rank);

// NumPy broadcasting of two shapes; false when they do not broadcast.
bool broadcast_shapes(c10::SymIntArrayRef a, c10::SymIntArrayRef b, std::vector<c10::SymInt>& out);

// ---------------------------------------------------------------------------------------------------------
// .out overloads: the caller-provided output must already have the inferred shape and dtype, and live on
// the inputs' device. (No resizing: a wrong output is a caller bug worth reporting.)
void check_out(const char* op, const char* name, const at::Tensor& out, c10::SymIntArrayRef shape,
               at::ScalarType dtype, const at::Tensor& like);
void check_out(const char* op, const char* name, const at::Tensor& out, const OutputSpec& spec,
               const at::Tensor& like);

// A new (contiguous) output of the given spec on like's device.
at::Tensor new_output(const OutputSpec& spec, const at::Tensor& like);

// A new (contiguous) output of t's shape, dtype and device (a forward op's result; symbolic sizes allowed).
at::Tensor like_output(const at::Tensor& t);

// Every tensor argument of one call on one device, checked first by every op's check (mixed devices would
// otherwise pick a kernel from the highest dispatch key, e.g. Meta, and skip arguments it ignores). The first
// defined tensor is the reference; an undefined tensor (absent optional) is skipped. The message names the
// argument: "npu_ext.<op>: <name> must be on the same device as <ref> (<device>), but got <device>".
struct NamedTensor {
  const char* name;
  const at::Tensor& tensor;
};
void check_one_device(const char* op, std::initializer_list<NamedTensor> tensors);

// True when `t` is one of the floating dtypes this device supports (fp16/bf16/fp32, plus fp64 off-NPU).
bool is_supported_float(const at::Tensor& t);

// The NPU path's own dtype guard, called by csrc/npu after the op's shared check: aclnn has only fp16, bf16
// and fp32 kernels for these ops. For a PrivateUse1 tensor the shared check has already rejected anything
// else with the same message; this also holds the NPU sources to aclnn's dtypes when they are run on tensors
// of another device type (as the host stand-in tests in tests/npu/test_npu_path.py do under the aarch64 emulation).
void check_npu_float(const char* op, const char* name, const at::Tensor& t);

}  // namespace npu_ext
