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
// What nnopbase caches (CANN's opbase and ops-nn sources): only COMPOSITE executors, the ones an op_api file
// builds with CREATE_EXECUTOR() (opbase src/nnopbase/composite_op/aclnn_engine/op_executor.cpp: the executor it makes
// is added to the thread's cache under the key torch_npu set). Each family's model declares its aclnn operators and
// which of them are cached (ops/<family>.cpp: kCached / kNotCached in its OpFamily, fake_opapi.h); of the
// extension's ten aclnn operators six are:
//   aclnnGeluBackwardV2   ops-nn activation/gelu_grad_v2/op_api/aclnn_gelu_backward_v2.cpp
//                         (aclnnGeluBackwardV2GetWorkspaceSize: CREATE_EXECUTOR(), the l0op calls, ReleaseTo)
//   aclnnGeluV2           ops-nn activation/gelu_v2/op_api/aclnn_gelu_v2.cpp (the same pattern)
//   aclnnPreluBackward, aclnnPrelu
//                         ops-nn's aclnn_prelu_backward.cpp and aclnn_prelu.cpp (the same pattern)
//   aclnnGroupedBiasAddGrad, aclnnGroupedBiasAddGradV2
//                         ops-nn's aclnn_grouped_bias_add_grad.cpp: both entry points call
//                         ExecGroupedBiasAddGradGetWorkspaceSize, which starts with CREATE_EXECUTOR()
// and four are not: they run phase 1 on every call (torch_npu looks the key up, misses, and nothing is kept):
//   aclnnLogit, aclnnLogitGrad
//                         generated operators: ops-nn loss/logit_grad/ has op_host and op_kernel but no op_api (and
//                         the same holds for Logit), so the entry points are generated and run through nnopbase's
//                         NnopbaseExecutor, which never touches the PTA cache
//   aclnnScaledMaskedSoftmax, aclnnScaledMaskedSoftmaxBackward
//                         ops-nn vfusion/scaled_masked_softmax_grad_v2/op_host/op_api/
//                         aclnn_scaled_masked_softmax_backward.cpp hands over to the generated
//                         aclnnInnerScaledMaskedSoftmaxGradV2 without CREATE_EXECUTOR (the forward's op_api does the
//                         same with its generated inner operator)
// CanUsePTACache answers true for all ten, the declared ones (nnopbase answers true for every API unless dump, profiling or
// DISABLE_L2_CACHE is on; here DISABLE_L2_CACHE, set to anything, turns it off); the fake answers false for
// torch_npu's own ATen operators (aten.cpp), which a real host would also cache where their op_api is composite.
//
// How nnopbase keeps them (opbase src/nnopbase/common/utils/op_cache.cpp, OpExecCacheManager):
//   * per thread (thread_local OpExecCacheManager): a key kept on one thread never hits on another;
//   * at most K_CACHE_LIMIT = 10000 entries per thread: the 10001st sets cacheHasFull_ and from then on nothing
//     more is cached on that thread (the 10000 kept still hit);
//   * an existing hash is never replaced: phase 1 under a key the thread already holds (another operator's entry,
//     an entry of another tensor count, an unusable entry) keeps nothing;
//   * a hit also checks the API's name: another operator's entry under the same hash is a miss;
//   * an entry becomes usable after its first launch succeeds (op_executor.cpp: canUse_ once phase 2 recorded the
//     launch); one whose launch failed, or whose executor was destroyed without a launch, stays unusable, and since
//     its hash is never replaced, that key never hits again on that thread.
//
// The model: an executor made by phase 1 while a key is set is kept (it and its aclTensor descriptors outlive
// the launch and the caller's aclDestroyTensor); a hit returns a launch of it that carries the new call's tensor
// addresses, taken in argument order, and the launch rebinds the kept descriptors to them before running. The
// first launch may run on another thread (torch_npu's task queue): the executor finds its entry in one map of all
// threads' kept executors. A thread's entries stay until fake_opapi_reset() (nnopbase frees them when the thread
// ends, which nothing here can observe); fake_opapi_reset() empties every thread's cache and its cacheHasFull_.
//
// Counters (fake_opapi_calls): "SetPTAHashKey <api>" (the V1 lookup's key, TASK_QUEUE_ENABLE 0/1),
// "SetPTACacheHashKey <api>" and "PTAFindExecCache <api>" (the V2 lookup, TASK_QUEUE_ENABLE=2), the V2 functions also
// per calling thread ("... thread <tid>", the kernel's thread id: threading.get_native_id()), "cache hit <api>", "cache miss <api>", "cache kept <api>" (an executor kept by
// phase 1), "cache not composite <api>" (phase 1 of an operator nnopbase does not cache, under a key), "cache
// exists <api>" (phase 1 under a key the thread already holds: nothing kept), "cache full <api>" (phase 1 on a
// thread whose cache is full: nothing kept), "cache other api <api>" (a hit refused by the API-name check);
// fake_opapi_cache_entries() returns the number kept (all threads), fake_opapi_cache_thread_entries() the calling
// thread's.
#include "fake_opapi.h"

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

constexpr size_t kCacheLimit = 10000;  // op_cache.cpp's K_CACHE_LIMIT: entries per thread

struct ThreadState {
  bool active = false;        // between InitPTACacheThreadLocal and UnInitPTACacheThreadLocal
  std::string api;            // the last CanUsePTACache(api)
  bool keyed = false;         // a key was set and phase 1 has not run under it yet
  uint64_t key = 0;           // SetPTAHashKey
  std::string key_v2;         // SetPTACacheHashKey
  bool v2 = false;
  std::vector<void*> addrs;  // AddTensorAddrToCachedList
};
thread_local ThreadState tls;

// One thread's cache (nnopbase's thread_local OpExecCacheManager).
struct ThreadCache {
  std::map<uint64_t, std::shared_ptr<CacheEntry>> v1;
  std::map<std::string, std::shared_ptr<CacheEntry>> v2;
  bool full = false;  // cacheHasFull_: K_CACHE_LIMIT entries were kept, nothing more is
};

std::mutex g_cache_mu;  // guards every ThreadCache and g_owned (fake_opapi_reset empties them from any thread)
// Every thread's cache, never freed (a thread's stays until fake_opapi_reset empties it; see the top).
std::vector<ThreadCache*>* const g_threads = new std::vector<ThreadCache*>;
// Every kept executor, whichever thread kept it: its first launch may run on torch_npu's task-queue thread.
std::map<const Executor*, std::shared_ptr<CacheEntry>> g_owned;

ThreadCache& mine() {
  thread_local ThreadCache* const cache = [] {
    auto* c = new ThreadCache;
    std::lock_guard<std::mutex> lock(g_cache_mu);
    g_threads->push_back(c);
    return c;
  }();
  return *cache;
}

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
  if (entry->api != tls.api) {  // nnopbase checks the API's name on a hit: another operator's executor, a miss
    count("cache other api " + tls.api);
    count("cache miss " + tls.api);
    return nullptr;
  }
  {
    std::lock_guard<std::mutex> lock(entry->mu);
    if (!entry->usable) {  // never launched, or its launch failed: a miss, and the key stays taken (keep())
      count("cache miss " + tls.api);
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
  hit->options = entry->exec->options;
  hit->device = entry->exec->device;
  if (workspace_size != nullptr) *workspace_size = hit->workspace_size;
  count("cache hit " + entry->api);
  tls.keyed = false;
  return reinterpret_cast<aclOpExecutor*>(hit);
}

// Phase 1 made `e` with these tensor arguments: keep it under the thread's key, in the thread's cache, if nnopbase
// would: a composite executor, a key the thread does not hold yet, and room in the thread's cache.
void keep(Executor* e, const std::vector<const aclTensor*>& io) {
  if (!tls.active || !tls.keyed) return;
  tls.keyed = false;
  if (!cached_api(tls.api)) {  // a generated operator's NnopbaseExecutor: never in the PTA cache
    count("cache not composite " + tls.api);
    return;
  }
  std::vector<void*> first;
  for (const aclTensor* t : io) {
    if (t != nullptr) first.push_back(t->data);
  }
  if (first != tls.addrs) {  // hashed and converted arguments differ: not cacheable
    count("cache refused " + tls.api);
    return;
  }
  ThreadCache& cache = mine();
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    const bool exists = tls.v2 ? cache.v2.count(tls.key_v2) != 0 : cache.v1.count(tls.key) != 0;
    if (exists) {  // an existing hash is never replaced
      count("cache exists " + tls.api);
      return;
    }
    if (cache.full || cache.v1.size() + cache.v2.size() >= kCacheLimit) {
      cache.full = true;  // cacheHasFull_: nothing more is cached on this thread
      count("cache full " + tls.api);
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
    if (tls.v2) {
      cache.v2[tls.key_v2] = entry;
    } else {
      cache.v1[tls.key] = entry;
    }
    g_owned[e] = entry;
  }
  count("cache kept " + tls.api);
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
  std::vector<std::shared_ptr<CacheEntry>> entries;
  std::map<const Executor*, std::shared_ptr<CacheEntry>> owned;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    for (ThreadCache* c : *g_threads) {
      for (auto& kv : c->v1) entries.push_back(std::move(kv.second));
      for (auto& kv : c->v2) entries.push_back(std::move(kv.second));
      c->v1.clear();
      c->v2.clear();
      c->full = false;
    }
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
  return enabled() && extension_api(tls.api);
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
  count("SetPTAHashKey " + tls.api);
  tls.key = key;
  tls.v2 = false;
  tls.keyed = key != 0;  // 0: the hash buffer overflowed, nothing is cached
}

aclOpExecutor* PTAGetExecCache(uint64_t key, uint64_t* workspace_size) {
  ThreadCache& cache = mine();
  std::shared_ptr<CacheEntry> entry;
  {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = cache.v1.find(key);
    if (key != 0 && it != cache.v1.end()) entry = it->second;
  }
  return lookup(entry ? &entry : nullptr, workspace_size);
}

void SetPTACacheHashKey(uint8_t* buf, uint64_t len) {
  count("SetPTACacheHashKey " + tls.api);
  count("SetPTACacheHashKey thread " + std::to_string(thread_id()));
  tls.key_v2 = buf != nullptr ? std::string(reinterpret_cast<const char*>(buf), len) : std::string();
  tls.v2 = true;
  tls.keyed = buf != nullptr && len != 0;
}

aclOpExecutor* PTAFindExecCache(uint8_t* buf, uint64_t len, uint64_t* workspace_size) {
  count("PTAFindExecCache " + tls.api);
  count("PTAFindExecCache thread " + std::to_string(thread_id()));
  ThreadCache& cache = mine();
  std::shared_ptr<CacheEntry> entry;
  if (buf != nullptr && len != 0) {
    std::lock_guard<std::mutex> lock(g_cache_mu);
    auto it = cache.v2.find(std::string(reinterpret_cast<const char*>(buf), len));
    if (it != cache.v2.end()) entry = it->second;
  }
  return lookup(entry ? &entry : nullptr, workspace_size);
}

// Test hooks: the executors the cache keeps, on every thread and on the calling thread.
int fake_opapi_cache_entries() {
  std::lock_guard<std::mutex> lock(g_cache_mu);
  return static_cast<int>(g_owned.size());
}

int fake_opapi_cache_thread_entries() {
  ThreadCache& cache = mine();
  std::lock_guard<std::mutex> lock(g_cache_mu);
  return static_cast<int>(cache.v1.size() + cache.v2.size());
}

}  // extern "C"
