// Helpers shared by the CPU op files (not the kernels).
#pragma once

#include <ATen/ATen.h>
#include <ATen/MemoryOverlap.h>

#include <initializer_list>

namespace npu_ext {
namespace cpu {

// fn(out) when `direct`, else fn(tmp) on a fresh tensor of out's shape, then copied into out.
template <typename Fn>
void run_into(const at::Tensor& out, bool direct, Fn&& fn) {
  if (direct) {
    fn(out);
  } else {
    at::Tensor tmp = at::empty(out.sizes(), out.options());
    fn(tmp);
    out.copy_(tmp);
  }
}

// Runs fn(dst) with a contiguous destination: `out` itself when it is contiguous and shares no memory with
// the inputs, otherwise a fresh contiguous tensor that is copied into `out` afterwards. Lets the kernels
// assume a dense output while `.out` accepts any strides and aliasing.
template <typename Fn>
void with_contiguous_out(const at::Tensor& out, std::initializer_list<at::Tensor> inputs, Fn&& fn) {
  bool direct = out.is_contiguous();
  for (const auto& in : inputs) {
    // Only tensors sharing out's storage can overlap it (get_overlap_status alone answers "too hard" for
    // any input that is not dense, e.g. an expanded mask, which would force a needless copy).
    if (in.defined() && in.is_alias_of(out) && at::get_overlap_status(out, in) != at::MemOverlapStatus::No) {
      direct = false;
    }
  }
  run_into(out, direct, fn);
}

// Runs fn(dst) for an elementwise (TensorIterator) kernel: `out` itself unless it shares memory with an input
// other than exactly (the same elements: in-place, which TensorIterator supports), otherwise a fresh tensor
// of out's shape that is copied into `out` afterwards. So a partially overlapping `.out` gets the right
// result instead of ATen's internal "unsupported operation" error.
template <typename Fn>
void with_elementwise_out(const at::Tensor& out, std::initializer_list<at::Tensor> inputs, Fn&& fn) {
  bool direct = true;
  for (const auto& in : inputs) {
    if (in.defined() && in.is_alias_of(out)) {
      const auto status = at::get_overlap_status(out, in);
      if (status != at::MemOverlapStatus::No && status != at::MemOverlapStatus::Full) direct = false;
    }
  }
  run_into(out, direct, fn);
}

}  // namespace cpu
}  // namespace npu_ext
