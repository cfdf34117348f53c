// TEST-ONLY model of the grouped_bias_add family's aclnn operators (csrc/ops/grouped_bias_add/npu.cpp), part of the
// fake libopapi.so and of the stand-in's aclnn library (tests/npu_stub). As the CANN sources show them (ops-nn's
// aclnn_grouped_bias_add_grad.cpp; docs/npu.md):
//   * aclnnGroupedBiasAddGrad(gradY, groupIdxOptional, out) and aclnnGroupedBiasAddGradV2(..., int64 groupIdxType,
//     out): sums per group in fp32, rounded once; out written honouring its strides (ViewCopy); empty groups
//     zero-filled (A2/A3 and Ascend950 kernels). The hand-written L2 ignores the kernel lookup's status: where its
//     kernel GroupedBiasAddGrad is missing, phase 1 passes and the launch (phase 2) returns 561000 (ACLNN_ERR_INNER)
//     without writing the output.
// The forward op has no aclnn operator of its own (aclnnAddcmul, which it calls with probs, is aten.cpp's).
// Declared: the kernel GroupedBiasAddGrad on A2/A3/Ascend950 only; both APIs the extension's, their executors
// cached by nnopbase (both entry points start with CREATE_EXECUTOR(): pta_cache.cpp)
// (what every family's model shares, and the OpFamily declaration below: fake_opapi.h, "The operator families'
// models").
#include "../fake_opapi.h"

namespace fake {
namespace {

const OpFamily kGroupedBiasAdd("grouped_bias_add", {{"GroupedBiasAddGrad", kSocA2A3_950}},
                               {{"aclnnGroupedBiasAddGrad", kCached}, {"aclnnGroupedBiasAddGradV2", kCached}});

struct GroupedExec : Executor {
  const aclTensor *gy, *idx, *out;
  int64_t idx_type;
  int run(void* workspace) override {
    const int64_t G = out->sizes[0], H = out->sizes[1];
    float* acc = static_cast<float*>(workspace);
    int64_t start = 0;
    for (int64_t j = 0; j < G; ++j) {
      int64_t row0, rows;
      const aclTensor* base = gy;
      if (idx == nullptr) {
        row0 = 0;
        rows = gy->sizes[1];
      } else {
        const int64_t v = load_int(idx, j * idx->strides[0]);
        const int64_t end = idx_type == 0 ? v : start + v;
        // aclnn reads out of bounds here; the stand-in refuses instead (the NPU path must validate first).
        if (v < 0 || end < start || end > gy->sizes[0]) return kInternal;
        row0 = start;
        rows = end - start;
        start = end;
      }
      if (rows == 0) {  // like the A2 kernel: an empty group's row is zero-filled
        for (int64_t h = 0; h < H; ++h) store(out, j * out->strides[0] + h * out->strides[1], 0.0f);
        continue;
      }
      for (int64_t h = 0; h < H; ++h) acc[h] = 0.0f;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < H; ++h) {
          const int64_t off = idx == nullptr
                                  ? j * base->strides[0] + r * base->strides[1] + h * base->strides[2]
                                  : (row0 + r) * base->strides[0] + h * base->strides[1];
          acc[h] += load(gy, off);
        }
      }
      for (int64_t h = 0; h < H; ++h) store(out, j * out->strides[0] + h * out->strides[1], acc[h]);
    }
    return kSuccess;
  }
};

int grouped_phase1(const aclTensor* gradY, const aclTensor* groupIdx, int64_t groupIdxType, aclTensor* out,
                   uint64_t* workspaceSize, aclOpExecutor** executor) {
  if (!gradY || !out || !workspaceSize || !executor) return kNullptr;
  if (!valid(gradY) || !valid(out) || !is_float(gradY) || out->dtype != gradY->dtype) return kInvalid;
  if (groupIdxType != 0 && groupIdxType != 1) return kInvalid;
  int64_t G;
  if (groupIdx != nullptr) {
    if (!valid(groupIdx) || (groupIdx->dtype != I32 && groupIdx->dtype != I64)) return kInvalid;
    if (groupIdx->sizes.size() != 1 || groupIdx->sizes[0] > 2048 || gradY->sizes.size() != 2) return kInvalid;
    G = groupIdx->sizes[0];
  } else {
    if (gradY->sizes.size() != 3) return kInvalid;
    G = gradY->sizes[0];
  }
  if (out->sizes != std::vector<int64_t>{G, gradY->sizes.back()}) return kInvalid;
  auto* e = new GroupedExec;
  e->gy = gradY; e->idx = groupIdx; e->out = out; e->idx_type = groupIdxType;
  e->internal_copies = copies({gradY, groupIdx});
  // hand-written L2: l0op::GroupedBiasAddGrad ignores the kernel lookup's status, so a missing kernel is only
  // found at the launch
  e->kernel_missing = !has_kernel("GroupedBiasAddGrad");
  e->workspace_size = static_cast<uint64_t>(gradY->sizes.back()) * sizeof(float);
  return finish_phase1(e, workspaceSize, executor, {gradY, groupIdx, out});
}

}  // namespace

extern "C" {

// --- aclnnGroupedBiasAddGrad / V2 ---------------------------------------------------------------------------
int aclnnGroupedBiasAddGradGetWorkspaceSize(const aclTensor* gradY, const aclTensor* groupIdxOptional, aclTensor* out,
                                            uint64_t* workspaceSize, aclOpExecutor** executor) {
  count("aclnnGroupedBiasAddGradGetWorkspaceSize");
  return grouped_phase1(gradY, groupIdxOptional, 0, out, workspaceSize, executor);
}

int aclnnGroupedBiasAddGrad(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnGroupedBiasAddGrad", workspace, workspaceSize, executor);
}

int aclnnGroupedBiasAddGradV2GetWorkspaceSize(const aclTensor* gradY, const aclTensor* groupIdxOptional,
                                              int64_t groupIdxType, aclTensor* out, uint64_t* workspaceSize,
                                              aclOpExecutor** executor) {
  count("aclnnGroupedBiasAddGradV2GetWorkspaceSize");
  return grouped_phase1(gradY, groupIdxOptional, groupIdxType, out, workspaceSize, executor);
}

int aclnnGroupedBiasAddGradV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void* stream) {
  return phase2("aclnnGroupedBiasAddGradV2", workspace, workspaceSize, executor);
}

}  // extern "C"

}  // namespace fake
