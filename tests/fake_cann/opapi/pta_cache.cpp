// TEST-ONLY: nnopbase's executor cache as torch_npu drives it (the "PTA cache"), part of the fake libopapi.so of
// `make test-npu` (not of the aarch64 stand-in, whose EXEC_NPU_CMD has no cache).
//
// How torch_npu uses it (op-plugin op_plugin/utils/op_api_common.cpp, every release from 2.7.1; the functions are
// resolved from libopapi.so with GetOpApiFuncAddr, and a CANN without them has no cache):
//   CheckAndInitFunc(api)  CanUsePTACache(api), then InitPTACacheThreadLocal()
//   hashing the call       AddTensorAddrToCachedList(storage base) for every defined tensor argument, in order;
//                          the rest (sizes, dtype, strides, offset, storage size of each tensor, scalars, strings,
//                          the deterministic setting or level, device, stream, the API's name) only in the hash
//   lookup, TASK_QUEUE_ENABLE 0/1 (hit_cache)  SetPTAHashKey(hash); PTAGetExecCache(hash, &workspace_size)
//          TASK_QUEUE_ENABLE 2 (hit_cache_v2)  SetPTACacheHashKey(buf, len); PTAFindExecCache(buf, len, &ws)
//   a hit                  torch_npu launches the returned executor's phase 2 itself (ExecuteCachedOp) and ends
//                          the thread-local state (UnInitPTACacheThreadLocal)
//   a miss                 phase 1 (aclnnXxxGetWorkspaceSize) runs on the same thread with the key still set, and
//                          nnopbase keeps the executor it makes under that key; UnInitExecCommonCtx ends the state.
//
// The model: an executor made by phase 1 while a key is set is kept (it and its aclTensor descriptors outlive
// the launch and the caller's aclDestroyTensor); a hit returns a launch of it that carries the new call's tensor
// addresses, taken in argument order, and the launch rebinds the kept descriptors to them before running. The
// operators modelled for the extension are cached (kCacheable), torch_npu's own ATen operators (aten.cpp) are
// not: CanUsePTACache answers false for them, as nnopbase does for an operator that cannot be cached.
// DISABLE_L2_CACHE (any value) turns the cache off, as in nnopbase (CanUsePTACache answers false).
//
// Counters (fake_opapi_calls): "cache hit <api>", "cache miss <api>", "cache kept <api>" (an executor kept by
// phase 1), "cache entries" is not a counter: fake_opapi_cache_entries() returns the number kept.
#include "fake_opapi.h"

#include <set>

namespace fake {

struct CacheEntry {
  std::string api;
  Executor* exec = nullptr;            // kept: never deleted by a launch
  std::vector<aclTensor*> io;          // its tensor arguments in order (nullptr: an absent optional one)
  std::vector<void*> first;            // the addresses of the call that made it
  std::mutex mu;                       // one launch at a time rebinds and runs it
  bool usable = false;                 // set by the first successful launch (nnopbase: canUse_ after phase 2
                                       // recorded the launch); an entry never launched, or whose launch failed,
                                       // stays in the cache unusable: its key never hits nor is kept again
  // The cache's own objects go uncounted; one its caller never released (an executor neither launched nor
  // destroyed, a descriptor never destroyed) stays counted as live: a leak the tests see after the cache is emptied.
  ~CacheEntry() {
    exec->released = true;
    delete exec;
    for (aclTensor* t : io) delete t;
  }
};

namespace {

const std::set<std::string> kCacheable = {
    "aclnnGeluBackwardV2", "aclnnPreluBackward",  "aclnnGroupedBiasAddGrad",          "aclnnGroupedBiasAddGradV2",
    "aclnnLogitGrad",      "aclnnGeluV2",         "aclnnScaledMaskedSoftmaxBackward", "aclnnPrelu",
    "aclnnLogit",          "aclnnScaledMaskedSoftmax"};

struct ThreadState {
  bool active = false;        // between InitPTACacheThreadLocal and UnInitPTACacheThreadLocal
  std::string api;            // the last CanUsePTACache(api)
  bool keyed = false;         // a key was set and no executor was kept under it yet
  uint64_t key = 0;           // SetPTAHashKey
  std::string key_v2;         // SetPTACacheHashKey
  bool v2 = false;
  std::vector<void*> addrs;  // AddTensorAddrToCachedList
};
thread_local ThreadState tls;

std::mutex g_cache_mu;
std::map<uint64_t, std::shared_ptr<CacheEntry>> g_v1;
std::map<std::string, std::shared_ptr<CacheEntry>> g_v2;
std::map<const Executor*, std::shared_ptr<CacheEntry>> g_owned;

bool enabled() { return std::getenv("DISABLE_L2_CACHE") == nullptr; }  // nnopbase: set to anything, no cache

// A hit's launch of a kept executor.
struct Hit : Executor {
  int run(void*) override { return kInner; }  // never run itself: g_cache_run runs the entry's executor
};

aclOpExecutor* lookup(const std::shared_ptr<CacheEntry>* found, uint64_t* workspace_size) {
  if (found == nullptr) {
    count("cache miss " + tls.api);
    return nullptr;
  }
  const std::shared_ptr<CacheEntry>& entry = *found;
  {
    std::lock_guard<std::mutex> lock(entry->mu);
    if (!entry->usable) {
      count("cache miss " + tls.api);
      tls.keyed = false;  // the key is taken: what phase 1 makes now is not kept
      return nullptr;
    }
  }
  size_t n = 0;
  for (const aclTensor* t : entry->io) n += t != nullptr ? 1 : 0;
  if (tls.addrs.size() != n) {  // the same key for another tensor count: a collision the model refuses to run
    count("cache collision " + tls.api);
    return nullptr;
  }
  auto* hit = new Hit;
  hit->cache = entry;
  hit->addresses = tls.addrs;
  hit->workspace_size = entry->exec->workspace_size;
  hit->kernel_missing = entry->exec->kernel_missing;
  hit->empty = entry->exec->empty;
  hit->internal_copies = entry->exec->internal_copies;
  hit->deterministic = entry->exec->deterministic;
  if (workspace_size != nullptr) *workspace_size = hit->workspace_size;
  count("cache hit " + entry->api);
  tls.keyed = false;
  return reinterpret_cast<aclOpExecutor*>(hit);
}

// Phase 1 made `e` with these tensor arguments: keep it under the thread's key.
void keep(Executor* e, const std::vector<const aclTensor*>& io) {
  if (!tls.active || !tls.keyed) return;
  std::vector<void*> first;
  for (const aclTensor* t : io) {
    if (t != nullptr) first.push_back(t->data);
  }
  if (first != tls.addrs) {  // hashed and converted arguments differ: not cacheable
    count("cache refused " + tls.api);
    tls.keyed = false;
    return;
  }
  auto entry = std::make_shared<CacheEntry>();
  entry->api = tls.api;
  entry->exec = e;
  entry->first = std::move(first);
  for (const aclTensor* t : io) {
    auto* kept = const_cast<aclTensor*>(t);
    if (kept != nullptr) kept->pinned = true;
    entry->io.push_back(kept);
  }
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    if (tls.v2) {
      g_v2[tls.key_v2] = entry;
    } else {
      g_v1[tls.key] = entry;
    }
    g_owned[e] = entry;
  }
  count("cache kept " + tls.api);
  tls.keyed = false;
}

int run_cached(Executor* e, void* workspace) {
  std::shared_ptr<CacheEntry> entry = e->cache;
  const std::vector<void*>* addrs = &e->addresses;
  if (!entry) {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_owned.find(e);
    if (it == g_owned.end()) return e->run(workspace);
    entry = it->second;
    addrs = &entry->first;
  }
  std::lock_guard<std::mutex> lock(entry->mu);
  size_t i = 0;
  for (aclTensor* t : entry->io) {
    if (t != nullptr) t->data = (*addrs)[i++];
  }
  const int ret = entry->exec->run(workspace);
  if (!e->cache) entry->usable = ret == kSuccess;  // the launch that made it
  return ret;
}

bool owns(const Executor* e) {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  return g_owned.count(e) != 0;
}

void clear() {
  std::map<uint64_t, std::shared_ptr<CacheEntry>> v1;
  std::map<std::string, std::shared_ptr<CacheEntry>> v2;
  std::map<const Executor*, std::shared_ptr<CacheEntry>> owned;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    v1.swap(g_v1);
    v2.swap(g_v2);
    owned.swap(g_owned);
  }
}  // the entries go here, outside the lock (a queued hit keeps its own until it ran)

const bool g_installed = [] {
  g_cache_phase1 = keep;
  g_cache_run = run_cached;
  g_cache_owns = owns;
  g_cache_clear = clear;
  return true;
}();

}  // namespace
}  // namespace fake

using namespace fake;

extern "C" {

bool CanUsePTACache(const char* api) {
  tls.api = api != nullptr ? api : "";
  return enabled() && kCacheable.count(tls.api) != 0;
}

void InitPTACacheThreadLocal() {
  tls.active = true;
  tls.keyed = false;
  tls.addrs.clear();
}

void UnInitPTACacheThreadLocal() {
  tls.active = false;
  tls.keyed = false;
  tls.addrs.clear();
}

void AddTensorAddrToCachedList(void* addr) { tls.addrs.push_back(addr); }

void SetPTAHashKey(uint64_t key) {
  tls.key = key;
  tls.v2 = false;
  tls.keyed = key != 0;  // 0: the hash buffer overflowed, nothing is cached
}

aclOpExecutor* PTAGetExecCache(uint64_t key, uint64_t* workspace_size) {
  std::shared_ptr<CacheEntry> entry;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_v1.find(key);
    if (key != 0 && it != g_v1.end()) entry = it->second;
  }
  return lookup(entry ? &entry : nullptr, workspace_size);
}

void SetPTACacheHashKey(uint8_t* buf, uint64_t len) {
  tls.key_v2 = buf != nullptr ? std::string(reinterpret_cast<const char*>(buf), len) : std::string();
  tls.v2 = true;
  tls.keyed = buf != nullptr && len != 0;
}

aclOpExecutor* PTAFindExecCache(uint8_t* buf, uint64_t len, uint64_t* workspace_size) {
  std::shared_ptr<CacheEntry> entry;
  if (buf != nullptr && len != 0) {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = g_v2.find(std::string(reinterpret_cast<const char*>(buf), len));
    if (it != g_v2.end()) entry = it->second;
  }
  return lookup(entry ? &entry : nullptr, workspace_size);
}

// Test hook: the executors the cache keeps.
int fake_opapi_cache_entries() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  return static_cast<int>(g_owned.size());
}

}  // extern "C"
