// TEST-ONLY random-number aclnn operators of the fake libopapi.so: what torch_npu calls for torch.randn / normal_ and
// torch.rand / uniform_ on npu tensors. op-plugin (Ascend/op-plugin op_plugin/ops/opapi/NormalKernelNpuOpApi.cpp,
// UniformKernelNpuOpApi.cpp) takes (seed, offset) from the NPU generator's philox_engine_inputs(counter_offset),
// which hands out the current offset and advances it, and passes both by value:
//   aclnnInplaceNormal(selfRef, float mean, float std, int64_t seed, int64_t offset)
//   aclnnInplaceUniform(selfRef, double from, double to, int64_t seed, int64_t offset)
// (with the stream capturing a graph, the *Tensor variants read them from device tensors instead: not modelled).
// Without these entry points op-plugin's DO_COMPATIBILITY falls back to the acl_op StatelessRandomNormalV2 /
// StatelessRandomUniformV2 on an Atlas A2/A3, which the fake does not model either.
//
// The numbers: a counter-based generator, Philox4x32-10, keyed by the seed, its counter the element's block index
// (64 bits) and the offset (64 bits); 4 uint32 per block of 4 consecutive elements (in the output view's row-major
// order). So the same (seed, offset) gives the same values, and another seed or offset (every draw advances the
// generator's offset) other values. uniform: u = the top m bits of a uint32 times 2^-m (m = the dtype's significand
// bits: 24 fp32, 11 fp16, 8 bf16, 32 fp64), so u lies in [0, 1) exactly representable, and the value is
// from + (to - from) * u computed in double, rounded once to the dtype. normal: Box-Muller over the block's two pairs
// of uint32 (u1 in (0, 1], u2 in [0, 1), 24 bits each), mean + std * z computed in double, rounded once.
// Dropout on an Atlas A2/A3 (op-plugin NativeDropoutKernelNpuOpApi.cpp, _npu_dropout; not the aclnn-only Ascend950,
// which takes aclnnDropoutV3, not modelled) is two operators, the mask generated on the secondary stream with (seed,
// offset) from philox_engine_inputs(LEGACY_RAND_COUNTER_OFFSET), then applied; the backward applies the same mask:
//   aclnnDropoutGenMaskV2(aclIntArray shape, double p, int64_t seed, int64_t offset, aclDataType probDataType, out)
//       out: uint8 of ceil(numel / 128) * 16 bytes, one bit per element of `shape` in row-major order (element i is
//       bit i % 8 of byte i / 8), 1 = kept with probability 1 - p; the padding bits 0. Element i's draw: lane i % 4
//       of block i / 4 of the same Philox stream, u = top 24 bits * 2^-24, kept when u >= p.
//   aclnnDropoutDoMask(self, mask, double prob, out)   out = self * bit * (1 / (1 - prob)) (0 for prob 1), in fp32
//       (fp64 for fp64), rounded once. The backward passes prob = 1 - 1 / scale.
// The values cannot equal a real NPU's bit for bit: the kernel's own use of the Philox stream (how many numbers per
// element, which transform, which rounding) is not in any source available here; only the distributions and the
// seed / offset contract are modelled.
#include <cmath>
#include <cstdint>

#include "aten_ops.h"

namespace fake {
namespace {

// Philox4x32 with 10 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11).
struct Block {
  uint32_t v[4];
};

Block philox(uint64_t seed, uint64_t index, uint64_t offset) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  uint32_t c[4] = {static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32), static_cast<uint32_t>(offset),
                   static_cast<uint32_t>(offset >> 32)};
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kM0) * c[0], p1 = static_cast<uint64_t>(kM1) * c[2];
    const uint32_t hi0 = static_cast<uint32_t>(p0 >> 32), lo0 = static_cast<uint32_t>(p0);
    const uint32_t hi1 = static_cast<uint32_t>(p1 >> 32), lo1 = static_cast<uint32_t>(p1);
    const uint32_t n0 = hi1 ^ c[1] ^ k0, n2 = hi0 ^ c[3] ^ k1;
    c[0] = n0;
    c[1] = lo1;
    c[2] = n2;
    c[3] = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return Block{{c[0], c[1], c[2], c[3]}};
}

int significand_bits(at::ScalarType st) {
  switch (st) {
    case at::kHalf: return 11;
    case at::kBFloat16: return 8;
    case at::kDouble: return 32;
    default: return 24;
  }
}

// Fills the view of `self` in row-major order with fn(block, lane) (a double), rounded once to self's dtype.
template <typename Fn>
void fill(const aclTensor* self, uint64_t seed, uint64_t offset, Fn&& fn) {
  const at::Tensor out = T(self);
  const int64_t n = out.numel();
  at::Tensor values = at::empty({n}, at::TensorOptions().dtype(at::kDouble));
  double* v = values.data_ptr<double>();
  for (int64_t i = 0; i < n; i += 4) {
    const Block b = philox(seed, static_cast<uint64_t>(i / 4), offset);
    for (int lane = 0; lane < 4 && i + lane < n; ++lane) v[i + lane] = fn(b, lane);
  }
  out.copy_(values.view(out.sizes()));
}

constexpr int32_t kAclUInt8 = 4;  // ACL_UINT8: the dropout mask

bool floating(const aclTensor* t) { return t->dtype == F32 || t->dtype == F16 || t->dtype == BF16 || t->dtype == F64; }

int random_phase1(const char* api, const aclTensor* self, std::function<void()> body, uint64_t* workspace_size,
                  aclOpExecutor** executor) {
  if (self == nullptr) {
    count(std::string(api) + "GetWorkspaceSize");
    return reject(kNullptr, std::string(api) + ": selfRef is a null pointer.");
  }
  if (!floating(self) || static_cast<int64_t>(self->sizes.size()) > kMaxDims) {
    count(std::string(api) + "GetWorkspaceSize");
    return reject(kInvalid, std::string(api) + ": selfRef must be float32, float16, bfloat16 or float64 of rank 8 "
                                               "at most, not " + dtype_name(self->dtype) + ".");
  }
  if (numel(self) == 0) return queue(api, [] {}, workspace_size, executor);
  return queue(api, std::move(body), workspace_size, executor);
}

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

int aclnnInplaceNormalGetWorkspaceSize(aclTensor* selfRef, float mean, float std, int64_t seed, int64_t offset, WS) {
  return random_phase1("aclnnInplaceNormal", selfRef, [=]() {
    fill(selfRef, static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), [=](const Block& b, int lane) {
      const int pair = lane / 2;
      const double u1 = (static_cast<double>(b.v[2 * pair] >> 8) + 1.0) * 0x1p-24;  // (0, 1]
      const double u2 = static_cast<double>(b.v[2 * pair + 1] >> 8) * 0x1p-24;      // [0, 1)
      const double r = std::sqrt(-2.0 * std::log(u1)), angle = 2.0 * M_PI * u2;
      const double z = lane % 2 == 0 ? r * std::cos(angle) : r * std::sin(angle);
      return static_cast<double>(mean) + static_cast<double>(std) * z;
    });
  }, workspaceSize, executor);
}
int aclnnInplaceNormal(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnInplaceNormal", workspace, workspaceSize, executor);
}

int aclnnInplaceUniformGetWorkspaceSize(aclTensor* selfRef, double from, double to, int64_t seed, int64_t offset, WS) {
  const int bits = selfRef != nullptr && floating(selfRef) ? significand_bits(scalar_type(selfRef->dtype)) : 24;
  return random_phase1("aclnnInplaceUniform", selfRef, [=]() {
    fill(selfRef, static_cast<uint64_t>(seed), static_cast<uint64_t>(offset), [=](const Block& b, int lane) {
      const double u = std::ldexp(static_cast<double>(b.v[lane] >> (32 - bits)), -bits);  // [0, 1)
      return from + (to - from) * u;
    });
  }, workspaceSize, executor);
}
int aclnnInplaceUniform(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnInplaceUniform", workspace, workspaceSize, executor);
}

int aclnnDropoutGenMaskV2GetWorkspaceSize(const aclIntArray* shape, double p, int64_t seed, int64_t offset,
                                          int32_t probDataType, aclTensor* out, WS) {
  (void)probDataType;
  int64_t n = 1;
  for (int64_t d : A(shape)) n *= d;
  const int64_t bytes = (n + 127) / 128 * 16;
  if (shape == nullptr || out == nullptr || out->dtype != kAclUInt8 || numel(out) != bytes || !(p >= 0.0 && p <= 1.0)) {
    count("aclnnDropoutGenMaskV2GetWorkspaceSize");
    return reject(kInvalid, "aclnnDropoutGenMaskV2: out must be uint8 of " + std::to_string(bytes) +
                                " bytes (ceil(numel / 128) * 16) and p within [0, 1].");
  }
  return queue("aclnnDropoutGenMaskV2", [=]() {
    at::Tensor mask = at::zeros({bytes}, at::TensorOptions().dtype(at::kByte));
    uint8_t* m = mask.data_ptr<uint8_t>();
    for (int64_t i = 0; i < n; i += 4) {
      const Block b = philox(static_cast<uint64_t>(seed), static_cast<uint64_t>(i / 4), static_cast<uint64_t>(offset));
      for (int lane = 0; lane < 4 && i + lane < n; ++lane) {
        const double u = static_cast<double>(b.v[lane] >> 8) * 0x1p-24;
        if (u >= p) m[(i + lane) / 8] |= static_cast<uint8_t>(1u << ((i + lane) % 8));
      }
    }
    W(out, mask);
  }, workspaceSize, executor);
}
int aclnnDropoutGenMaskV2(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnDropoutGenMaskV2", workspace, workspaceSize, executor);
}

int aclnnDropoutDoMaskGetWorkspaceSize(const aclTensor* self, const aclTensor* mask, double prob, aclTensor* out, WS) {
  if (self == nullptr || mask == nullptr || out == nullptr || mask->dtype != kAclUInt8 || out->sizes != self->sizes ||
      numel(mask) * 8 < numel(self)) {
    count("aclnnDropoutDoMaskGetWorkspaceSize");
    return reject(kInvalid, "aclnnDropoutDoMask: mask must be uint8 with a bit for each element of self, out "
                            "self's shape.");
  }
  return queue("aclnnDropoutDoMask", [=]() {
    const at::Tensor x = T(self);
    const int64_t n = x.numel();
    // the bits, element i at bit i % 8 of byte i / 8
    const at::Tensor bytes = T(mask).contiguous().to(at::kLong);
    const at::Tensor index = at::arange(n, at::TensorOptions().dtype(at::kLong));
    const at::Tensor bits = bytes.index_select(0, at::floor_divide(index, 8)).bitwise_right_shift(index.remainder(8))
                                .bitwise_and(1);
    const at::ScalarType wide = x.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
    const double scale = prob < 1.0 ? 1.0 / (1.0 - prob) : 0.0;
    W(out, (x.to(wide).reshape({-1}) * bits.to(wide) * scale).view(x.sizes()));
  }, workspaceSize, executor);
}
int aclnnDropoutDoMask(void* workspace, uint64_t workspaceSize, aclOpExecutor* executor, void*) {
  return phase2("aclnnDropoutDoMask", workspace, workspaceSize, executor);
}

}  // extern "C"
