// The fake CANN's HCCL (test-only): the types of CANN's hccl_types.h it needs, written out so that the library
// builds against any torch_npu release's headers, and the element arithmetic of its reductions.
#pragma once

#include <cstdint>
#include <cstring>

#include "../float16.h"

extern "C" {
typedef int32_t HcclResult;  // CANN's enum: 0 success, 1 parameter, 4 internal, 5 not supported, 9 timeout
typedef void* HcclComm;
typedef void* aclrtStream;
enum { HCCL_OK = 0, HCCL_E_PARA = 1, HCCL_E_PTR = 2, HCCL_E_INTERNAL = 4, HCCL_E_NOT_SUPPORT = 5,
       HCCL_E_SYSCALL = 8, HCCL_E_TIMEOUT = 9, HCCL_E_REMOTE = 21 };
enum { HCCL_REDUCE_SUM = 0, HCCL_REDUCE_PROD = 1, HCCL_REDUCE_MAX = 2, HCCL_REDUCE_MIN = 3 };
enum { DT_INT8 = 0, DT_INT16 = 1, DT_INT32 = 2, DT_FP16 = 3, DT_FP32 = 4, DT_INT64 = 5, DT_UINT64 = 6, DT_UINT8 = 7,
       DT_UINT16 = 8, DT_UINT32 = 9, DT_FP64 = 10, DT_BF16 = 11, DT_INT128 = 12, DT_HIF8 = 14, DT_FP8E4M3 = 15,
       DT_FP8E5M2 = 16, DT_FP8E8M0 = 17 };
constexpr uint32_t ROOT_INFO_BYTES = 4108;  // HCCL_ROOT_INFO_BYTES: torch_npu copies this many through its store
struct HcclSendRecvItem {  // HcclSendRecvItemDef
  int32_t sendRecvType;    // 0 send, 1 receive
  void* buf;
  uint64_t count;
  int32_t dataType;
  uint32_t remoteRank;
};
}

namespace fake_hccl {

// The size of one element of `dt` in bytes; 0 for a type the fake does not know.
inline size_t element_size(int32_t dt) {
  switch (dt) {
    case DT_INT8: case DT_UINT8: case DT_HIF8: case DT_FP8E4M3: case DT_FP8E5M2: case DT_FP8E8M0: return 1;
    case DT_INT16: case DT_UINT16: case DT_FP16: case DT_BF16: return 2;
    case DT_INT32: case DT_UINT32: case DT_FP32: return 4;
    case DT_INT64: case DT_UINT64: case DT_FP64: return 8;
    case DT_INT128: return 16;
    default: return 0;
  }
}

// 16-bit floats are added in fp32 and rounded once (round to nearest even), as the operator models compute.
using fake::bf16_to_float;
using fake::float_to_bf16;
using fake::float_to_half;
using fake::half_to_float;

}  // namespace fake_hccl
