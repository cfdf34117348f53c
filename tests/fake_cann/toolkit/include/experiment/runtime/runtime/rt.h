/* Test-only stand-in for CANN's runtime header "runtime/runtime/rt.h", which triton-ascend 3.2.0 needs to build
 * its driver helper (triton/backends/ascend/npu_utils.cpp) when the driver initialises. It declares only what
 * that file uses and defines it inline, so the helper needs no CANN runtime library. Only the SoC query succeeds:
 * it reports the fake ACL runtime's aclrtGetSocName(). Every device operation fails with ACL_ERROR_RT_NO_DEVICE,
 * so no triton kernel can be registered or launched. C++ only (npu_utils.cpp is built with g++). */
#ifndef TEST_STANDIN_RT_H
#define TEST_STANDIN_RT_H
#include <cstddef>
#include <cstdint>
#include <cstring>

typedef int32_t rtError_t;
typedef void *rtStream_t;
typedef uint32_t rtMemType_t;
typedef char char_t;

#define RT_ERROR_NONE 0
#define RT_STANDIN_NO_DEVICE 207004 /* ACL_ERROR_RT_NO_DEVICE */

typedef struct {
    uint32_t magic;
    uint32_t version;
    const void *data;
    uint64_t length;
} rtDevBinary_t;

#define RT_DEV_BINARY_MAGIC_ELF 1u
#define RT_DEV_BINARY_MAGIC_ELF_AIVEC 2u
#define RT_MEMORY_HOST ((uint32_t)0x1)
#define RT_MEMORY_HBM ((uint32_t)0x2)

typedef enum { RT_MEMCPY_HOST_TO_DEVICE = 1, RT_MEMCPY_DEVICE_TO_HOST = 2 } rtMemcpyKind_t;
typedef enum {
    RT_LIMIT_TYPE_LOW_POWER_TIMEOUT = 0,
    RT_LIMIT_TYPE_SIMT_WARP_STACK_SIZE,
    RT_LIMIT_TYPE_SIMT_DVG_WARP_STACK_SIZE,
    RT_LIMIT_TYPE_STACK_SIZE
} rtLimitType_t;

extern "C" const char *aclrtGetSocName(); /* defined by the fake libascendcl.so */

static inline rtError_t rtGetSocVersion(char_t *ver, const uint32_t maxLen) {
    const char *name = aclrtGetSocName();
    if (name == nullptr || maxLen == 0) return RT_STANDIN_NO_DEVICE;
    std::strncpy(ver, name, maxLen - 1);
    ver[maxLen - 1] = '\0';
    return RT_ERROR_NONE;
}
static inline rtError_t rtSetDevice(int32_t) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtDevBinaryRegister(const rtDevBinary_t *, void **) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtFunctionRegister(void *, const void *, const char *, const void *, uint32_t) {
    return RT_STANDIN_NO_DEVICE;
}
static inline rtError_t rtGetAiCoreCount(uint32_t *) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtStreamCreate(rtStream_t *, int32_t) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtStreamDestroy(rtStream_t) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtMallocHost(void **, uint64_t, uint32_t) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtFreeHost(void *) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtMalloc(void **, uint64_t, rtMemType_t, uint16_t) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtFree(void *) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtMemcpy(void *, uint64_t, const void *, uint64_t, rtMemcpyKind_t) { return RT_STANDIN_NO_DEVICE; }
static inline rtError_t rtDeviceSetLimit(int32_t, rtLimitType_t, uint32_t) { return RT_STANDIN_NO_DEVICE; }
#endif
