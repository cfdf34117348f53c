// TEST-ONLY, preloaded (LD_PRELOAD) by the version harness (tools/versions.py) when torch is one of the package
// index's CUDA builds. torch_npu 2.14.0 does not start beside the CUDA build of torch 2.14: both libc10_cuda and
// libtorch_npu register the allocator-config key "pinned_reserve_segment_size_mb", and c10's
// AcceleratorAllocatorConfig::registerDeviceConfigParserHook (an inline function compiled into libtorch_npu, called
// there directly, so it cannot be interposed) aborts the load on a duplicated key. Ascend hosts run torch's CPU
// build, where only torch_npu registers the key; the index has no CPU build of 2.14.
//
// The key set itself is libc10's (AcceleratorAllocatorConfig::getMutableKeys(), which libtorch_npu calls through
// its PLT): this library interposes that accessor, and on the first call from libtorch_npu (its registration)
// removes the keys CUDA's allocator config registered, so torch_npu's registration adds the ones it shares again
// (CUDA's others are then unknown to PYTORCH_ALLOC_CONF's parser: no CUDA device here). Every other caller gets the
// set untouched. Nothing of this reaches a user's installation.
#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_set>

namespace {
using Keys = std::unordered_set<std::string>;
constexpr const char* kGetMutableKeys = "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig14getMutableKeysB5cxx11Ev";
// CUDAAllocatorConfig::getKeys() of torch 2.14 (c10/cuda/CUDAAllocatorConfig.h): what libc10_cuda registered;
// torch_npu registers several of them again ("pinned_reserve_segment_size_mb", "per_process_memory_fraction", ...)
constexpr const char* kCudaKeys[] = {"backend", "release_lock_on_cudamalloc", "pinned_use_cuda_host_register",
                                     "release_lock_on_hipmalloc", "pinned_use_hip_host_register",
                                     "graph_capture_record_stream_reuse", "pinned_reserve_segment_size_mb",
                                     "pinned_num_register_threads", "per_process_memory_fraction",
                                     "pinned_free_catch_all", "throw_on_cudamalloc_oom"};
}  // namespace

// c10::CachingAllocator::AcceleratorAllocatorConfig::getMutableKeys()
__attribute__((visibility("default"))) Keys& npu_ext_shim_get_mutable_keys() __asm__(
    "_ZN3c1016CachingAllocator26AcceleratorAllocatorConfig14getMutableKeysB5cxx11Ev");

Keys& npu_ext_shim_get_mutable_keys() {
  using Fn = Keys& (*)();
  // libc10's own definition (torch loads libc10 locally, so RTLD_NEXT would not see it; by handle it is found in
  // libc10 itself before this library)
  static const Fn real = reinterpret_cast<Fn>(dlsym(dlopen("libc10.so", RTLD_LAZY | RTLD_NOLOAD), kGetMutableKeys));
  Keys& keys = real();
  Dl_info info;
  if (dladdr(__builtin_return_address(0), &info) != 0 && info.dli_fname != nullptr &&
      std::strstr(info.dli_fname, "libtorch_npu") != nullptr) {
    static std::once_flag once;
    std::call_once(once, [&keys] {
      for (const char* key : kCudaKeys) keys.erase(key);
    });
  }
  return keys;
}
