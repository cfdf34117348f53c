// The fake HCCL's communicator: one POSIX shared-memory segment per communicator, named in the root info, which
// every rank maps. It holds a header (the ranks' pids, their barrier counts, a word to sleep on), one staging slot
// per rank for the collectives, and one single-chunk channel per ordered pair of ranks for send / receive.
// The segment's name is unlinked as soon as every rank has attached (and swept at the next init when its creator is
// gone), so nothing is left in /dev/shm after a run, a killed one included.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "fake_hccl.h"

namespace fake_hccl {

constexpr int MAX_RANKS = 64;
constexpr const char* SHM_PREFIX = "torch_ext_fake_hccl_";

struct Channel {                   // ranks src -> dst: one chunk in flight
  std::atomic<uint64_t> posted;    // chunks the sender has written
  std::atomic<uint64_t> taken;     // chunks the receiver has read
  uint64_t bytes;                  // the size of the chunk in flight
};

struct Header {
  uint32_t magic;
  uint32_t nranks;
  uint64_t slot_bytes, channel_bytes;
  std::atomic<uint32_t> attached;
  std::atomic<uint32_t> epoch;     // bumped at every change; waiters sleep on it (futex)
  std::atomic<int32_t> pids[MAX_RANKS];
  std::atomic<uint64_t> arrived[MAX_RANKS];  // barriers each rank has reached
  uint64_t values[MAX_RANKS];      // one number per rank exchanged at a barrier (all_to_all_v's round count)
  Channel channels[MAX_RANKS * MAX_RANKS];
};

struct Comm {
  std::string name;                // the segment's name (without '/'), also the communicator's name
  int rank = 0, nranks = 0;
  Header* h = nullptr;
  size_t map_bytes = 0;
  uint64_t barriers = 0;           // barriers this rank has passed
  HcclResult error = HCCL_OK;      // the first failure, reported by HcclGetCommAsyncError
  double timeout_s = 0;            // HCCL_EXEC_TIMEOUT (0: none)

  char* slot(int r) const;
  char* channel_buffer(int src, int dst) const;
  Channel& channel(int src, int dst) const { return h->channels[src * MAX_RANKS + dst]; }
  void wake() const;
  // Sleeps until `ready()` holds; on the timeout, records and reports an error naming `op` and the peers
  // `missing()` lists, and returns it.
  template <typename Ready, typename Missing>
  HcclResult wait(const char* op, Ready ready, Missing missing);
  HcclResult barrier(const char* op);
  HcclResult fail(HcclResult code, const char* op, const std::vector<int>& peers, const char* what);
};

HcclResult reduce(void* out, const void* const* in, int n, uint64_t count, int32_t dt, int op);
Comm* init(uint32_t nranks, const char* root_info, uint32_t rank, HcclResult* result);
void destroy(Comm* c);
void make_root_info(char* root_info);

// One send or receive in progress (HcclSend, HcclRecv, HcclBatchSendRecv, a group's).
struct P2p {
  Comm* comm;
  bool send;
  char* buf;
  uint64_t bytes;
  int peer;
  uint64_t done = 0;
  bool started = false;
};
HcclResult run_p2p(std::vector<P2p>& ops, const char* op);

int futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns);
void futex_wake(std::atomic<uint32_t>* word);
double now_s();
bool pid_alive(int pid);

template <typename Ready, typename Missing>
HcclResult Comm::wait(const char* op, Ready ready, Missing missing) {
  if (error != HCCL_OK) return error;
  double deadline = timeout_s > 0 ? now_s() + timeout_s : 0;
  for (;;) {
    uint32_t e = h->epoch.load(std::memory_order_acquire);
    if (ready()) return HCCL_OK;
    if (deadline && now_s() > deadline)
      return fail(HCCL_E_TIMEOUT, op, missing(), "timed out after HCCL_EXEC_TIMEOUT");
    futex_wait(&h->epoch, e, 100 * 1000 * 1000);
  }
}

}  // namespace fake_hccl
