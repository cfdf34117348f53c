// The fake HCCL's entry points (libhccl.so), those torch_npu looks up by name: init and teardown, the collectives
// and send / receive between processes on this host (comm.h). Streams are synchronous in the fake, so every call
// completes before it returns. Each collective stages its data through the ranks' slots a chunk at a time (any size
// works): write your part, barrier, read what you need, barrier.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "comm.h"

using namespace fake_hccl;

namespace {

std::mutex group_mutex;
int group_depth = 0;             // HcclGroupStart minus HcclGroupEnd (libhcomm.so)
std::vector<P2p> group_ops;      // the sends and receives of the open group, run at its end

Comm* C(HcclComm comm) { return static_cast<Comm*>(comm); }

HcclResult check(Comm* c, int32_t dt, size_t* es) {
  if (!c) return HCCL_E_PTR;
  if (c->error != HCCL_OK) return c->error;
  *es = element_size(dt);
  return *es ? HCCL_OK : HCCL_E_NOT_SUPPORT;
}

// The staging every collective here shares, a chunk of `per` elements at a time: `write(off, n)` puts this rank's
// part into the slots, a barrier, `read(off, n)` takes what this rank needs from them, a barrier (the slots are free
// again).
template <class Write, class Read>
HcclResult staged(Comm* c, const char* name, uint64_t count, uint64_t per, Write write, Read read) {
  for (uint64_t off = 0; off < count; off += per) {
    uint64_t n = std::min(per, count - off);
    write(off, n);
    if (HcclResult r = c->barrier(name)) return r;
    if (HcclResult r = read(off, n)) return r;
    if (HcclResult r = c->barrier(name)) return r;
  }
  return HCCL_OK;
}

// A reduction over every rank's `count` elements at `send`: all ranks (root < 0) or `root` get it in `recv`.
HcclResult reduce_op(const char* name, void* send, void* recv, uint64_t count, int32_t dt, int op, int root, Comm* c) {
  size_t es;
  if (HcclResult r = check(c, dt, &es)) return r;
  std::vector<const void*> in(c->nranks);
  return staged(
      c, name, count, c->h->slot_bytes / es,
      [&](uint64_t off, uint64_t n) { memcpy(c->slot(c->rank), static_cast<char*>(send) + off * es, n * es); },
      [&](uint64_t off, uint64_t n) -> HcclResult {
        if (root >= 0 && root != c->rank) return HCCL_OK;
        for (int k = 0; k < c->nranks; ++k) in[k] = c->slot(k);
        return reduce(static_cast<char*>(recv) + off * es, in.data(), c->nranks, n, dt, op);
      });
}

// Every rank sends block j (`count` elements at send + j * send_stride) to rank j, which puts rank r's at
// recv + r * recv_stride; `root` >= 0: only the root sends (scatter); `reduce_op` >= 0: the blocks a rank gets are
// reduced into recv instead (reduce-scatter).
HcclResult exchange(const char* name, const char* send, char* recv, uint64_t count, uint64_t send_stride,
                    uint64_t recv_stride, int32_t dt, int root, int reduce_kind, Comm* c) {
  size_t es;
  if (HcclResult r = check(c, dt, &es)) return r;
  int n = c->nranks;
  uint64_t per = c->h->slot_bytes / es / n;
  std::vector<const void*> in(n);
  return staged(
      c, name, count, per,
      [&](uint64_t off, uint64_t m) {
        if (root < 0 || root == c->rank)
          for (int j = 0; j < n; ++j)
            memcpy(c->slot(c->rank) + j * per * es, send + (j * send_stride + off) * es, m * es);
      },
      [&](uint64_t off, uint64_t m) -> HcclResult {
        if (reduce_kind >= 0) {
          for (int k = 0; k < n; ++k) in[k] = c->slot(k) + c->rank * per * es;
          return reduce(recv + off * es, in.data(), n, m, dt, reduce_kind);
        }
        if (root >= 0) {
          memcpy(recv + off * es, c->slot(root) + c->rank * per * es, m * es);
        } else {
          for (int k = 0; k < n; ++k)
            memcpy(recv + (k * recv_stride + off) * es, c->slot(k) + c->rank * per * es, m * es);
        }
        return HCCL_OK;
      });
}

HcclResult p2p(Comm* c, bool send, void* buf, uint64_t count, int32_t dt, uint32_t peer, const char* name) {
  size_t es;
  if (HcclResult r = check(c, dt, &es)) return r;
  P2p op{c, send, static_cast<char*>(buf), count * es, (int)peer};
  {
    std::lock_guard<std::mutex> lock(group_mutex);
    if (group_depth > 0) {
      group_ops.push_back(op);
      return HCCL_OK;
    }
  }
  std::vector<P2p> ops{op};
  return run_p2p(ops, name);
}

}  // namespace

extern "C" {

HcclResult HcclGetRootInfo(char* root_info) {
  if (!root_info) return HCCL_E_PTR;
  make_root_info(root_info);
  return HCCL_OK;
}

HcclResult HcclCommInitRootInfoConfig(uint32_t nranks, const char* root_info, uint32_t rank, const void* config,
                                      HcclComm* comm) {
  if (!root_info || !comm) return HCCL_E_PTR;
  const char* q = getenv("PER_STREAM_QUEUE");
  if (q && atoi(q) == 1) {
    fprintf(stderr, "[fake HCCL] ERROR: PER_STREAM_QUEUE=1 is not supported by the fake CANN: its streams are "
                    "synchronous, so HCCL on its own task queue would run unordered against the compute it waits "
                    "for. Unset PER_STREAM_QUEUE.\n");
    return HCCL_E_NOT_SUPPORT;
  }
  HcclResult r;
  *comm = init(nranks, root_info, rank, &r);
  return r;
}

HcclResult HcclCommInitRootInfo(uint32_t nranks, const char* root_info, uint32_t rank, HcclComm* comm) {
  return HcclCommInitRootInfoConfig(nranks, root_info, rank, nullptr, comm);
}

HcclResult HcclCommDestroy(HcclComm comm) {
  destroy(C(comm));
  return HCCL_OK;
}

// torch_npu sets the config fields below this (buffer size, deterministic, the communicator's name)
uint32_t HcclGetCommConfigCapability() { return 3; }

HcclResult HcclGetCommName(HcclComm comm, char* name) {
  if (!comm || !name) return HCCL_E_PTR;
  snprintf(name, 128, "%s", C(comm)->name.c_str());
  return HCCL_OK;
}

HcclResult HcclSetConfig(int32_t config, int32_t value) { return HCCL_OK; }  // the fake is always deterministic

HcclResult HcclGetCommAsyncError(HcclComm comm, HcclResult* error) {
  if (!comm || !error) return HCCL_E_PTR;
  *error = C(comm)->error;
  return HCCL_OK;
}

HcclResult HcclGetRankSize(HcclComm comm, uint32_t* size) {
  if (!comm || !size) return HCCL_E_PTR;
  *size = C(comm)->nranks;
  return HCCL_OK;
}

HcclResult HcclGetRankId(HcclComm comm, uint32_t* rank) {
  if (!comm || !rank) return HCCL_E_PTR;
  *rank = C(comm)->rank;
  return HCCL_OK;
}

HcclResult HcclAllReduce(void* send, void* recv, uint64_t count, int32_t dt, int32_t op, HcclComm comm,
                         aclrtStream stream) {
  return reduce_op("HcclAllReduce", send, recv, count, dt, op, -1, C(comm));
}

HcclResult HcclReduce(void* send, void* recv, uint64_t count, int32_t dt, int32_t op, uint32_t root, HcclComm comm,
                      aclrtStream stream) {
  return reduce_op("HcclReduce", send, recv, count, dt, op, (int)root, C(comm));
}

HcclResult HcclBroadcast(void* buf, uint64_t count, int32_t dt, uint32_t root, HcclComm comm, aclrtStream stream) {
  Comm* c = C(comm);
  size_t es;
  if (HcclResult r = check(c, dt, &es)) return r;
  char* data = static_cast<char*>(buf);
  return staged(
      c, "HcclBroadcast", count, c->h->slot_bytes / es,
      [&](uint64_t off, uint64_t n) {
        if (c->rank == (int)root) memcpy(c->slot(root), data + off * es, n * es);
      },
      [&](uint64_t off, uint64_t n) -> HcclResult {
        if (c->rank != (int)root) memcpy(data + off * es, c->slot(root), n * es);
        return HCCL_OK;
      });
}

HcclResult HcclAllGather(void* send, void* recv, uint64_t count, int32_t dt, HcclComm comm, aclrtStream stream) {
  Comm* c = C(comm);
  size_t es;
  if (HcclResult r = check(c, dt, &es)) return r;
  return staged(
      c, "HcclAllGather", count, c->h->slot_bytes / es,
      [&](uint64_t off, uint64_t n) { memcpy(c->slot(c->rank), static_cast<char*>(send) + off * es, n * es); },
      [&](uint64_t off, uint64_t n) -> HcclResult {
        for (int k = 0; k < c->nranks; ++k)
          memcpy(static_cast<char*>(recv) + (k * count + off) * es, c->slot(k), n * es);
        return HCCL_OK;
      });
}

HcclResult HcclReduceScatter(void* send, void* recv, uint64_t count, int32_t dt, int32_t op, HcclComm comm,
                             aclrtStream stream) {
  if (op < HCCL_REDUCE_SUM || op > HCCL_REDUCE_MIN) return HCCL_E_PARA;
  return exchange("HcclReduceScatter", static_cast<char*>(send), static_cast<char*>(recv), count, count, 0, dt, -1,
                  op, C(comm));
}

HcclResult HcclScatter(void* send, void* recv, uint64_t count, int32_t dt, uint32_t root, HcclComm comm,
                       aclrtStream stream) {
  return exchange("HcclScatter", static_cast<char*>(send), static_cast<char*>(recv), count, count, 0, dt, (int)root,
                  -1, C(comm));
}

HcclResult HcclAlltoAll(const void* send, uint64_t send_count, int32_t send_dt, const void* recv, uint64_t recv_count,
                        int32_t recv_dt, HcclComm comm, aclrtStream stream) {
  if (send_count != recv_count || send_dt != recv_dt) return HCCL_E_PARA;
  return exchange("HcclAlltoAll", static_cast<const char*>(send), (char*)recv, send_count, send_count, recv_count,
                  send_dt, -1, -1, C(comm));
}

HcclResult HcclAlltoAllV(const void* send, const void* send_counts, const void* send_displs, int32_t send_dt,
                         const void* recv, const void* recv_counts, const void* recv_displs, int32_t recv_dt,
                         HcclComm comm, aclrtStream stream) {
  Comm* c = C(comm);
  size_t es;
  if (HcclResult r = check(c, send_dt, &es)) return r;
  if (send_dt != recv_dt) return HCCL_E_PARA;
  auto sc = static_cast<const uint64_t*>(send_counts), sd = static_cast<const uint64_t*>(send_displs);
  auto rc = static_cast<const uint64_t*>(recv_counts), rd = static_cast<const uint64_t*>(recv_displs);
  int n = c->nranks;
  uint64_t per = c->h->slot_bytes / es / n, most = 0;
  for (int j = 0; j < n; ++j) most = std::max({most, sc[j], rc[j]});
  c->h->values[c->rank] = most;  // every rank must run as many rounds as the largest block anywhere needs
  if (HcclResult r = c->barrier("HcclAlltoAllV")) return r;
  for (int j = 0; j < n; ++j) most = std::max(most, c->h->values[j]);
  if (HcclResult r = c->barrier("HcclAlltoAllV")) return r;
  auto part = [&](uint64_t total, uint64_t off) { return total > off ? std::min(per, total - off) : 0; };
  for (uint64_t off = 0; off < most; off += per) {
    for (int j = 0; j < n; ++j)
      memcpy(c->slot(c->rank) + j * per * es, static_cast<const char*>(send) + (sd[j] + off) * es,
             part(sc[j], off) * es);
    if (HcclResult r = c->barrier("HcclAlltoAllV")) return r;
    for (int k = 0; k < n; ++k)
      memcpy((char*)recv + (rd[k] + off) * es, c->slot(k) + c->rank * per * es, part(rc[k], off) * es);
    if (HcclResult r = c->barrier("HcclAlltoAllV")) return r;
  }
  return HCCL_OK;
}

HcclResult HcclSend(void* buf, uint64_t count, int32_t dt, uint32_t dest, HcclComm comm, aclrtStream stream) {
  return p2p(C(comm), true, buf, count, dt, dest, "HcclSend");
}

HcclResult HcclRecv(void* buf, uint64_t count, int32_t dt, uint32_t src, HcclComm comm, aclrtStream stream) {
  return p2p(C(comm), false, buf, count, dt, src, "HcclRecv");
}

HcclResult HcclBatchSendRecv(HcclSendRecvItem* items, uint32_t n, HcclComm comm, aclrtStream stream) {
  Comm* c = C(comm);
  std::vector<P2p> ops;
  for (uint32_t i = 0; i < n; ++i) {
    size_t es;
    if (HcclResult r = check(c, items[i].dataType, &es)) return r;
    ops.push_back(P2p{c, items[i].sendRecvType == 0, static_cast<char*>(items[i].buf), items[i].count * es,
                      (int)items[i].remoteRank});
  }
  return run_p2p(ops, "HcclBatchSendRecv");
}

// libhcomm.so's: the sends and receives between them run together at the outermost end
HcclResult HcclGroupStart() {
  std::lock_guard<std::mutex> lock(group_mutex);
  ++group_depth;
  return HCCL_OK;
}

HcclResult HcclGroupEnd() {
  std::vector<P2p> ops;
  {
    std::lock_guard<std::mutex> lock(group_mutex);
    if (group_depth == 0) return HCCL_E_PARA;
    if (--group_depth > 0) return HCCL_OK;
    ops.swap(group_ops);
  }
  return ops.empty() ? HCCL_OK : run_p2p(ops, "HcclGroupEnd");
}

}  // extern "C"
