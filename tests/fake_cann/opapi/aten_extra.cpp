// TEST-ONLY aclnn operators of the fake libopapi.so that the executed docs' example (README:
// `python examples/train_tiny.py --device npu`) reaches beyond aten.cpp's: its MoE routing (torch.argsort(stable=True),
// torch.bincount, torch.cumsum, Tensor.index_copy, the backward of max(dim)), its sigmoid and its loss
// (F.binary_cross_entropy_with_logits), forward and backward. Computed by CPU ATen over the descriptors' host buffers,
// like aten.cpp's. The signatures are op-plugin's calls (Ascend/op-plugin; the same on its 7.x branches, torch_npu 2.6,
// and on 26.1.0 and master, torch_npu 2.13), in op_plugin/ops/opapi/:
//   aclnnSort(self, bool stable, int64 dim, bool descending, values, indices)        SortKernelNpuOpApi.cpp
//       argsort is sort's indices (ArgSortKernelNpuOpApi.cpp); sort(stable=...) calls aclnnSort without
//       DO_COMPATIBILITY, so even on an Atlas A2 torch_npu stops there when it is missing;
//   aclnnBincount(self, weights or null, int64 minlength, out)                       BincountKernelNpuOpApi.cpp
//       out int64 without weights, fp32 for fp32 weights, else fp64, sized by op-plugin from aclnnMin / aclnnMax;
//   aclnnCumsum(self, int64 dim, aclDataType dtype, out)                              CumsumKernelNpuOpApi.cpp
//   aclnnInplaceScatter(selfRef, int64 dim, index, src, int64 reduction)              ScatterKernelNpuOpApi.cpp
//       scatter_ passes reduction 0 (none; 1 add, 2 multiply are scatter's reduce= forms); the backward of max(dim)
//       scatters the gradient into zeros;
//   aclnnGeluBackward(gradOutput, self, gradInput)                                   GeluBackwardKernelNpuOpApi.cpp
//       what gelu_backward calls on an Atlas A2 / A3 (the Ascend950 takes aclnnGeluBackwardV2, backward.cpp), whatever
//       `approximate` says (on 2.6's op-plugin generated with `exec: aclnnGeluBackward, grad_output, self,
//       grad_input`). Its kernel GeluGrad is the tanh form's derivative: hicann/ops-nn's golden for it
//       (activation/gelu_grad/tests/assets/golden.py) is aten.gelu_backward(approximate="tanh") with 16-bit inputs in
//       fp32, as aclnnGelu's model in aten.cpp;
// and, generated from op_plugin/config/op_plugin_functions.yaml (`gen_opapi` with `exec: aclnnX`: the ATen schema's
// arguments in order, then the output):
//   aclnnIndexCopy(self, int64 dim, index, source, out), aclnnInplaceIndexCopy(selfRef, dim, index, source)
//   aclnnSigmoidBackward(gradOutput, output, gradInput)
//   aclnnBinaryCrossEntropyWithLogits(self, target, weight or null, posWeight or null, int64 reduction, out)
//   aclnnBinaryCrossEntropyWithLogitsBackward(gradOutput, self, target, weight, posWeight, int64 reduction, out)
//       npu_binary_cross_entropy_with_logits_backward, which op_plugin/config/derivatives.yaml binds to
//       binary_cross_entropy_with_logits.
//   aclnnConstantPadNd(self, aclIntArray pad, aclScalar value, out)                ConstantPadNdKernelNpuOpApi.cpp
//       pad as torch's: (before, after) pairs from the last dimension; a negative one crops. ProcessGroupHCCL pads a
//       list all_gather's tensor to a multiple of 512 bytes with it (byte_alignment); without it torch_npu falls to
//       acl_op Fill, which the fake refuses.
//   aclnnRepeatInterleaveWithDim(self, repeats, int64 dim, int64 outputSize, out)
//       what Tensor.repeat_interleave calls (grouped_bias_add's NPU forward, csrc/ops/grouped_bias_add/npu.cpp, for the
//       bias rows with group_idx): the plain definition (dim 0, what the NPU path uses), out through its strides;
//       modelled without ATen, through the descriptors (fake_opapi.h), as the operator families' models in ops/.
// Except aclnnSort, op-plugin reaches each through DO_COMPATIBILITY: without it an Atlas A2 / A3 takes the acl_op
// route (Cumsum, ScatterElements, SigmoidGrad, GeluGrad, ...), which the fake refuses.
#include <ATen/ATen.h>

#include "aten_ops.h"

namespace fake {
namespace {

// torch's autograd formula for binary_cross_entropy_with_logits' input gradient (pytorch/pytorch
// torch/csrc/autograd/FunctionsManual.cpp, binary_cross_entropy_with_logits_backward), operation for operation, so the
// CPU backward and this give the same bits: with pos_weight, t = pos_weight * target and
// ((t + 1 - target) * sigmoid(x) - t) * grad, else (sigmoid(x) - target) * grad; then times weight, and divided by
// numel for the mean.
at::Tensor bce_with_logits_backward(const at::Tensor& grad, const at::Tensor& input, const at::Tensor& target,
                                    const at::Tensor& weight, const at::Tensor& pos_weight, int64_t reduction) {
  at::Tensor g;
  if (pos_weight.defined()) {
    const at::Tensor t = pos_weight.mul(target);
    g = t.add(1).sub_(target).mul_(input.sigmoid()).sub_(t);
  } else {
    g = input.sigmoid().sub_(target);
  }
  g.mul_(grad);
  if (weight.defined()) g.mul_(weight);
  if (reduction == at::Reduction::Mean) g.div_(input.numel());
  return g;
}

// aclnnRepeatInterleaveWithDim's executor.
struct RepeatExec : Executor {
  const aclTensor *self, *repeats, *out;
  int run(void*) override {
    const int64_t G = self->sizes[0], inner = numel(self) / std::max<int64_t>(G, 1);
    int64_t r = 0;
    for (int64_t g = 0; g < G; ++g) {
      const int64_t times = load_int(repeats, repeats->sizes.empty() ? 0 : g * repeats->strides[0]);
      for (int64_t t = 0; t < times; ++t, ++r)
        for (int64_t k = 0; k < inner; ++k)
          store(out, offset_of(out, r * inner + k), load(self, offset_of(self, g * inner + k)));
    }
    return kSuccess;
  }
};

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

FAKE_OP(Sort, (const aclTensor* self, bool stable, int64_t dim, bool descending, aclTensor* values, aclTensor* indices,
               WS), {
  auto r = at::sort(T(self), stable, dim, descending);
  W(values, std::get<0>(r));
  W(indices, std::get<1>(r));
})
FAKE_OP(Bincount, (const aclTensor* self, const aclTensor* weights, int64_t minlength, aclTensor* out, WS),
        W(out, at::bincount(T(self), T(weights, true), minlength)))
FAKE_OP(Cumsum, (const aclTensor* self, int64_t dim, int32_t dtype, aclTensor* out, WS),
        W(out, at::cumsum(T(self), dim, scalar_type(dtype))))
FAKE_OP(IndexCopy, (const aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* source, aclTensor* out,
                    WS), W(out, at::index_copy(T(self), dim, T(index), T(source))))
FAKE_OP(InplaceIndexCopy, (aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* source, WS),
        T(self).index_copy_(dim, T(index), T(source)))
FAKE_OP(InplaceScatter, (aclTensor* self, int64_t dim, const aclTensor* index, const aclTensor* src, int64_t reduction,
                         WS), {
  if (reduction == 0) {
    T(self).scatter_(dim, T(index), T(src));
  } else {
    T(self).scatter_(dim, T(index), T(src), reduction == 1 ? "add" : "multiply");
  }
})
FAKE_OP(ConstantPadNd, (const aclTensor* self, const aclIntArray* pad, const aclScalar* value, aclTensor* out, WS),
        W(out, at::constant_pad_nd(T(self), A(pad), S(value))))
FAKE_OP(GeluBackward, (const aclTensor* gradOutput, const aclTensor* self, aclTensor* gradInput, WS),
        W(gradInput, at::gelu_backward(T(gradOutput).to(at::kFloat), T(self).to(at::kFloat), "tanh")))
FAKE_OP(SigmoidBackward, (const aclTensor* gradOutput, const aclTensor* output, aclTensor* gradInput, WS),
        W(gradInput, at::sigmoid_backward(T(gradOutput), T(output))))
FAKE_OP(BinaryCrossEntropyWithLogits, (const aclTensor* self, const aclTensor* target, const aclTensor* weight,
                                       const aclTensor* posWeight, int64_t reduction, aclTensor* out, WS),
        W(out, at::binary_cross_entropy_with_logits(T(self), T(target), T(weight, true), T(posWeight, true),
                                                    reduction)))
FAKE_OP(BinaryCrossEntropyWithLogitsBackward, (const aclTensor* gradOutput, const aclTensor* self,
                                               const aclTensor* target, const aclTensor* weight,
                                               const aclTensor* posWeight, int64_t reduction, aclTensor* out, WS),
        W(out, bce_with_logits_backward(T(gradOutput), T(self), T(target), T(weight, true), T(posWeight, true),
                                        reduction)))

int aclnnRepeatInterleaveWithDimGetWorkspaceSize(const aclTensor* self, const aclTensor* repeats, int64_t dim,
                                                 int64_t outputSize, aclTensor* out, uint64_t* workspaceSize,
                                                 aclOpExecutor** executor) {
  count("aclnnRepeatInterleaveWithDimGetWorkspaceSize");
  if (!self || !repeats || !out || !workspaceSize || !executor) return kNullptr;
  if (dim != 0 || self->sizes.empty() || out->sizes.empty() || out->sizes[0] != outputSize ||
      out->dtype != self->dtype || (repeats->dtype != I64 && repeats->dtype != I32)) {
    return kInvalid;  // (the model covers dim 0, what the NPU path uses)
  }
  auto* e = new RepeatExec;
  e->self = self; e->repeats = repeats; e->out = out;
  e->internal_copies = copies({self, repeats});
  return finish_phase1(e, workspaceSize, executor);
}
int aclnnRepeatInterleaveWithDim(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnRepeatInterleaveWithDim", workspace, workspaceSize, executor);
}

}  // extern "C"
