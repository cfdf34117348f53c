// The fake HCCL's communicator (comm.h): the segment, its init and sweep, barriers, send / receive, timeouts.
#include "comm.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <random>

namespace fake_hccl {
namespace {

constexpr uint32_t MAGIC = 0x4c434348;        // "HCCL"
constexpr char ROOT_MAGIC[] = "fake-hccl-root-1";

uint64_t env_bytes(const char* name, uint64_t fallback) {
  const char* v = getenv(name);
  return v && *v ? strtoull(v, nullptr, 10) : fallback;
}

// HCCL_EXEC_TIMEOUT (seconds; 0 never), as CANN reads it; CANN's default 1836 s
double exec_timeout() {
  const char* v = getenv("HCCL_EXEC_TIMEOUT");
  return v && *v ? atof(v) : 1836.0;
}

// HCCL_CONNECT_TIMEOUT (seconds), how long init waits for every rank; CANN's default 120 s
double connect_timeout() {
  const char* v = getenv("HCCL_CONNECT_TIMEOUT");
  return v && *v ? atof(v) : 120.0;
}

// The pid a segment's name carries (the rank that made its root info), or 0.
int name_pid(const char* name) {
  size_t n = strlen(SHM_PREFIX);
  if (strncmp(name, SHM_PREFIX, n) != 0) return 0;
  return atoi(name + n);
}

// Unlinks the segments of communicators whose creator is gone: a run killed before all of its ranks attached.
void sweep() {
  DIR* d = opendir("/dev/shm");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    int pid = name_pid(e->d_name);
    if (pid > 0 && !pid_alive(pid)) shm_unlink((std::string("/") + e->d_name).c_str());
  }
  closedir(d);
}

}  // namespace

double now_s() {
  timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

bool pid_alive(int pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = fopen(path, "r");
  if (!f) return false;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = 0;
  const char* p = strrchr(buf, ')');  // the state follows the command name
  return !(p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X'));
}

int futex_wait(std::atomic<uint32_t>* word, uint32_t expected, long timeout_ns) {
  timespec t{timeout_ns / 1000000000, timeout_ns % 1000000000};
  return syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &t, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, 0x7fffffff, nullptr, nullptr, 0);
}

char* Comm::slot(int r) const {
  return reinterpret_cast<char*>(h) + sizeof(Header) + r * h->slot_bytes;
}

char* Comm::channel_buffer(int src, int dst) const {
  return reinterpret_cast<char*>(h) + sizeof(Header) + nranks * h->slot_bytes +
         (uint64_t)(src * nranks + dst) * h->channel_bytes;
}

void Comm::wake() const {
  h->epoch.fetch_add(1, std::memory_order_acq_rel);
  futex_wake(&h->epoch);
}

HcclResult Comm::fail(HcclResult code, const char* op, const std::vector<int>& peers, const char* what) {
  std::string who;
  for (int p : peers) {
    int pid = h->pids[p].load();
    who += (who.empty() ? "" : ", ") + std::string("rank ") + std::to_string(p) +
           (pid ? " (pid " + std::to_string(pid) + (pid_alive(pid) ? ", alive)" : ", gone)") : " (never attached)");
  }
  fprintf(stderr, "[fake HCCL] ERROR: %s on communicator %s, rank %d of %d: %s (%g s) waiting for peer %s\n", op,
          name.c_str(), rank, nranks, what, timeout_s, who.empty() ? "?" : who.c_str());
  fflush(stderr);
  error = code;
  return code;
}

HcclResult Comm::barrier(const char* op) {
  uint64_t seq = ++barriers;
  h->arrived[rank].store(seq, std::memory_order_release);
  wake();
  return wait(
      op,
      [&] {
        for (int r = 0; r < nranks; ++r)
          if (h->arrived[r].load(std::memory_order_acquire) < seq) return false;
        return true;
      },
      [&] {
        std::vector<int> m;
        for (int r = 0; r < nranks; ++r)
          if (h->arrived[r].load() < seq) m.push_back(r);
        return m;
      });
}

void make_root_info(char* root_info) {
  static std::atomic<uint32_t> counter{0};
  std::random_device rd;
  memset(root_info, 0, ROOT_INFO_BYTES);
  memcpy(root_info, ROOT_MAGIC, sizeof ROOT_MAGIC);
  snprintf(root_info + 32, 96, "%s%d_%u_%08x%08x", SHM_PREFIX, (int)getpid(), counter.fetch_add(1), rd(), rd());
}

Comm* init(uint32_t nranks, const char* root_info, uint32_t rank, HcclResult* result) {
  *result = HCCL_E_PARA;
  if (memcmp(root_info, ROOT_MAGIC, sizeof ROOT_MAGIC) != 0 || nranks == 0 || nranks > MAX_RANKS || rank >= nranks) {
    fprintf(stderr, "[fake HCCL] ERROR: init: not a root info of this fake, or rank %u of %u out of range\n", rank,
            nranks);
    return nullptr;
  }
  sweep();
  auto* c = new Comm;
  c->name.assign(root_info + 32, strnlen(root_info + 32, 95));
  c->rank = rank;
  c->nranks = nranks;
  c->timeout_s = exec_timeout();
  // every rank the same sizes (the same environment); a slot holds at least one 16-byte element per rank
  uint64_t slot = std::max<uint64_t>(env_bytes("NPU_FAKE_HCCL_SLOT_BYTES", 256 << 10), 16 * MAX_RANKS);
  uint64_t channel = std::max<uint64_t>(env_bytes("NPU_FAKE_HCCL_CHANNEL_BYTES", 64 << 10), 16);
  c->map_bytes = sizeof(Header) + nranks * slot + (uint64_t)nranks * nranks * channel;
  std::string path = "/" + c->name;
  int fd = shm_open(path.c_str(), O_RDWR | O_CREAT, 0600);
  if (fd < 0 || ftruncate(fd, c->map_bytes) != 0) {  // every rank sizes it alike; a new one is zero-filled
    fprintf(stderr, "[fake HCCL] ERROR: init: shm_open/ftruncate %s: %s\n", path.c_str(), strerror(errno));
    if (fd >= 0) close(fd);
    delete c;
    *result = HCCL_E_SYSCALL;
    return nullptr;
  }
  void* p = mmap(nullptr, c->map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) {
    delete c;
    *result = HCCL_E_SYSCALL;
    return nullptr;
  }
  c->h = static_cast<Header*>(p);
  Header* h = c->h;
  h->magic = MAGIC;  // the same values from every rank
  h->nranks = nranks;
  h->slot_bytes = slot;
  h->channel_bytes = channel;
  h->pids[rank].store(getpid());
  if (h->attached.fetch_add(1) + 1 == nranks) shm_unlink(path.c_str());  // the last to attach removes the name
  c->wake();
  double saved = c->timeout_s;
  c->timeout_s = connect_timeout();
  *result = c->wait(
      "HcclCommInitRootInfoConfig", [&] { return h->attached.load() >= nranks; },
      [&] {
        std::vector<int> m;
        for (uint32_t r = 0; r < nranks; ++r)
          if (!h->pids[r].load()) m.push_back(r);
        return m;
      });
  c->timeout_s = saved;
  if (*result != HCCL_OK) {
    shm_unlink(path.c_str());
    destroy(c);
    return nullptr;
  }
  return c;
}

void destroy(Comm* c) {
  if (!c) return;
  if (c->h) munmap(c->h, c->map_bytes);
  delete c;
}

// Moves every send and receive in `ops` forward, a chunk at a time on each pair's channel, until all are done. Those
// on different pairs progress together (two ranks that both send first do not deadlock); those on the same pair and
// direction in their order in `ops`, so the n-th send to a peer meets that peer's n-th receive, as in HCCL.
HcclResult run_p2p(std::vector<P2p>& ops, const char* op) {
  for (auto& o : ops)
    if (o.peer < 0 || o.peer >= o.comm->nranks) return HCCL_E_PARA;
  double deadline = -1;  // since the last chunk moved; < 0: not started
  for (;;) {
    bool all_done = true, moved = false;
    Comm* waiting = nullptr;
    std::vector<int> peers;
    std::vector<const Channel*> busy;  // the channels an earlier op of `ops` still uses: theirs come first
    for (auto& o : ops) {
      if (o.done == o.bytes && o.started) continue;
      Comm* c = o.comm;
      if (c->error != HCCL_OK) return c->error;
      int src = o.send ? c->rank : o.peer, dst = o.send ? o.peer : c->rank;
      Channel& ch = c->channel(src, dst);
      if (std::find(busy.begin(), busy.end(), &ch) != busy.end()) {
        all_done = false;
        continue;
      }
      busy.push_back(&ch);
      uint64_t posted = ch.posted.load(std::memory_order_acquire), taken = ch.taken.load(std::memory_order_acquire);
      if (o.send && posted == taken) {
        uint64_t n = std::min<uint64_t>(o.bytes - o.done, c->h->channel_bytes);
        memcpy(c->channel_buffer(src, dst), o.buf + o.done, n);
        ch.bytes = n;
        ch.posted.store(posted + 1, std::memory_order_release);
        o.done += n;
        o.started = moved = true;
        c->wake();
      } else if (!o.send && posted > taken) {
        uint64_t n = ch.bytes;
        if (o.done + n > o.bytes) return c->fail(HCCL_E_PARA, op, {o.peer}, "received more bytes than expected");
        memcpy(o.buf + o.done, c->channel_buffer(src, dst), n);
        ch.taken.store(taken + 1, std::memory_order_release);
        o.done += n;
        o.started = moved = true;
        c->wake();
      }
      if (o.done < o.bytes || !o.started) {
        all_done = false;
        waiting = c;
        peers = {o.peer};
      }
    }
    if (all_done) return HCCL_OK;
    if (moved) {
      deadline = -1;
      continue;
    }
    if (deadline < 0) deadline = waiting->timeout_s > 0 ? now_s() + waiting->timeout_s : 0;
    if (deadline && now_s() > deadline)
      return waiting->fail(HCCL_E_TIMEOUT, op, peers, "timed out after HCCL_EXEC_TIMEOUT");
    // sleep until the pair's next change; bounded, which also covers changes on the other communicators of `ops`
    uint32_t e = waiting->h->epoch.load(std::memory_order_acquire);
    futex_wait(&waiting->h->epoch, e, (ops.size() > 1 ? 5 : 100) * 1000 * 1000);
  }
}

}  // namespace fake_hccl
