// The MPI group (CPU tensors): every collective is MPI's non-blocking form (MPI_Iallreduce, ...),
// so a Work is one MPI_Request. Work::wait() polls MPI_Test against the deadline
// (get_comm_timeout): a peer that crashed, was killed or hangs becomes an Error naming it instead
// of a hang (MPI_ERRORS_RETURN is set, so MPI failures are return codes too). float16 and
// bfloat16 have no MPI type: they travel as 2-byte elements with user-defined reduction ops.
// Built only with MPI (CMake: SPORE_HAVE_MPI).
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <mutex>
#include <sstream>
#include <thread>

#include "core/log.h"
#include "parallel/internal.h"
#include "spore/parallel/parallel.h"
#include "spore/profiler.h"

// Reports the MPI call, MPI's own message, and where.
#define SPORE_MPI_CHECK(call)                                      \
  do {                                                             \
    const int rc_ = (call);                                        \
    if (rc_ != MPI_SUCCESS) [[unlikely]]                           \
      ::spore::parallel::mpi_fail(#call, rc_, __FILE__, __LINE__); \
  } while (0)

namespace spore::parallel {

[[noreturn]] void mpi_fail(const char* call, int rc, const char* file, int line) {
  char msg[MPI_MAX_ERROR_STRING] = {0};
  int len = 0;
  MPI_Error_string(rc, msg, &len);
  SPORE_THROW(ErrorKind::RuntimeError, "[parallel] ", call,
              " failed: ", std::string(msg, size_t(len)), " (", file, ":", line,
              ")\nhint: a peer may have exited; its own error is printed above");
}

namespace {

bool g_mpi_started_here = false;  // we called MPI_Init (so we finalise)
bool g_broken = false;            // a peer was lost: never finalise (it would wait for it)
bool g_finalized = false;

// ---- datatypes and ops --------------------------------------------------------------------------

template <typename T, int Op>  // Op: 0 sum, 1 max, 2 min
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) {
    const float x = float(a[i]), y = float(b[i]);
    b[i] = T(Op == 0 ? x + y : Op == 1 ? std::max(x, y) : std::min(x, y));
  }
}

struct HalfTypes {
  MPI_Datatype type = MPI_DATATYPE_NULL;
  MPI_Op f16[3], bf16[3];
};
HalfTypes& half_types() {
  static HalfTypes h = [] {
    HalfTypes r;
    MPI_Type_contiguous(2, MPI_BYTE, &r.type);
    MPI_Type_commit(&r.type);
    MPI_Op_create(&half_op<Half, 0>, 1, &r.f16[0]);
    MPI_Op_create(&half_op<Half, 1>, 1, &r.f16[1]);
    MPI_Op_create(&half_op<Half, 2>, 1, &r.f16[2]);
    MPI_Op_create(&half_op<BFloat16, 0>, 1, &r.bf16[0]);
    MPI_Op_create(&half_op<BFloat16, 1>, 1, &r.bf16[1]);
    MPI_Op_create(&half_op<BFloat16, 2>, 1, &r.bf16[2]);
    return r;
  }();
  return h;
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case kBool:
      return MPI_C_BOOL;
    case kUInt8:
      return MPI_UINT8_T;
    case kInt8:
      return MPI_INT8_T;
    case kInt32:
      return MPI_INT32_T;
    case kInt64:
      return MPI_INT64_T;
    case kFloat16:
    case kBFloat16:
      return half_types().type;
    case kFloat32:
      return MPI_FLOAT;
    case kFloat64:
      return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(DType t, ReduceOp op, const char* what) {
  const int k = op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? 2 : 0;  // Mean: sum, then scale
  if (t == kFloat16) return half_types().f16[k];
  if (t == kBFloat16) return half_types().bf16[k];
  if (t == kBool) {
    SPORE_CHECK_TYPE(k != 0, "[parallel] ", what, ": ", reduce_op_name(op),
                     " of bool is not defined; use max (any) or min (all)");
    return k == 1 ? MPI_LOR : MPI_LAND;
  }
  return k == 0 ? MPI_SUM : k == 1 ? MPI_MAX : MPI_MIN;
}

int count_of(const Tensor& t, const char* what) {
  SPORE_CHECK(t.numel() <= INT32_MAX, "[parallel] ", what, ": ", t.numel(),
              " elements exceed MPI's int count; split the tensor");
  return int(t.numel());
}

std::string human_bytes(size_t n) {
  std::ostringstream os;
  os.precision(3);
  if (n >= (1u << 20))
    os << double(n) / double(1u << 20) << " MB";
  else if (n >= 1024)
    os << double(n) / 1024.0 << " KB";
  else
    os << n << " B";
  return os.str();
}

// ---- the group ----------------------------------------------------------------------------------

struct PeerInfo {
  int pid;
  int world_rank;  // errors name this (a subgroup's own numbering means nothing to the user)
  char host[64];
};

// Keeps the deadline of a blocking MPI call: one thread for the group's life that looks every
// 50 ms at when the current call started. Arming is an atomic store, so small messages pay
// nothing noticeable. When a deadline passes the call is stuck (a peer is lost), so it prints
// the message and ends the process with exit code 1; mpirun then stops the other ranks.
class Watchdog {
 public:
  Watchdog() : thread_([this] { run(); }) {}
  ~Watchdog() {
    stop_ = true;
    thread_.join();
  }
  void arm(double seconds, std::function<std::string()> message) {
    {
      std::lock_guard<std::mutex> lk(mu_);  // only the slow path reads these
      seconds_ = seconds;
      message_ = std::move(message);
    }
    start_ns_.store(now_ns(), std::memory_order_release);
  }
  void disarm() { start_ns_.store(0, std::memory_order_release); }

 private:
  static int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }
  void run() {
    while (!stop_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const int64_t start = start_ns_.load(std::memory_order_acquire);
      if (start == 0) continue;
      std::lock_guard<std::mutex> lk(mu_);
      if (start_ns_.load() == start && double(now_ns() - start) * 1e-9 > seconds_) {
        log::critical("RuntimeError: {}", message_());
        std::_Exit(1);
      }
    }
  }
  std::atomic<int64_t> start_ns_{0};
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  double seconds_ = 0;
  std::function<std::string()> message_;
  std::thread thread_;
};

// ---- the launcher's stop: Spore's own lost-rank line ----------------------------------------
// When a rank dies (kill -9, out of memory), mpiexec stops the others with SIGTERM at once and
// reports only "rank N exited on signal 9". Before dying, each stopped rank looks at the ranks on
// its host (their /proc entries: gone or zombie) and names the one that is lost, its host and what
// to do. A signal handler may only use async-signal-safe calls: the lines are prepared when the
// world group starts, and the handler does open/read/write, then dies as SIGTERM would have.
namespace lost_report {
struct Peer {
  char proc_stat[40];  // "/proc/<pid>/stat"
  char line[400];      // the message when that process is gone
  size_t len = 0;
};
constexpr int kMaxPeers = 128;
Peer g_peers[kMaxPeers];
int g_count = 0;
struct sigaction g_prev {};

bool gone(const char* proc_stat) {
  const int fd = ::open(proc_stat, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return true;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  for (ssize_t i = n - 1; i > 1; --i)  // the state follows the last ')' of "pid (comm) S ..."
    if (buf[i - 1] == ')' && buf[i] == ' ' && i + 1 < n)
      return buf[i + 1] == 'Z' || buf[i + 1] == 'X';
  return false;
}

void on_sigterm(int sig) {
  for (int i = 0; i < g_count; ++i)
    if (gone(g_peers[i].proc_stat)) (void)!::write(2, g_peers[i].line, g_peers[i].len);
  ::sigaction(SIGTERM, &g_prev, nullptr);  // then die as SIGTERM would have (or the user's handler)
  ::raise(sig);
}

// Called once, by the world group, with every rank's pid and host.
void install(const std::vector<std::pair<int, std::string>>& pid_host, int self) {
  const std::string& host = pid_host[size_t(self)].second;
  for (int r = 0; r < int(pid_host.size()) && g_count < kMaxPeers; ++r) {
    if (r == self || pid_host[size_t(r)].second != host) continue;
    Peer& p = g_peers[g_count++];
    std::snprintf(p.proc_stat, sizeof p.proc_stat, "/proc/%d/stat", pid_host[size_t(r)].first);
    const int n = std::snprintf(
        p.line, sizeof p.line,
        "spore: [parallel] rank %d: rank %d (process %d on %s) is lost: it exited or was killed, "
        "so the launcher stops this rank too. Look above for rank %d's own error (out of memory? "
        "killed?); then rerun with --resume auto and the same --out to continue from the last "
        "checkpoint\n",
        self, r, pid_host[size_t(r)].first, host.c_str(), r);
    p.len = size_t(std::min<int>(n, int(sizeof p.line) - 1));
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigterm;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGTERM, &sa, &g_prev);
}
}  // namespace lost_report

class MpiGroup : public Group, public std::enable_shared_from_this<MpiGroup> {
 public:
  // The world (a duplicate of MPI_COMM_WORLD), or, given a communicator, a group over it (owned).
  explicit MpiGroup(MPI_Comm comm = MPI_COMM_NULL) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
      int provided = 0;
      // Funneled: only the thread that called init talks to MPI (the training loop's).
      SPORE_MPI_CHECK(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
      g_mpi_started_here = true;
      std::atexit([] { detail::finalize_mpi(); });
    }
    if (comm == MPI_COMM_NULL)
      MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    else
      comm_ = comm;
    is_subgroup_ = comm != MPI_COMM_NULL;
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    PeerInfo me{};
    me.pid = int(getpid());
    MPI_Comm_rank(MPI_COMM_WORLD, &me.world_rank);
    gethostname(me.host, sizeof(me.host) - 1);
    host_ = me.host;
    peers_.resize(size_t(size_));
    // Blocking, but every rank is starting up: a rank that never arrives is what mpirun reports.
    SPORE_MPI_CHECK(MPI_Allgather(&me, int(sizeof(PeerInfo)), MPI_BYTE, peers_.data(),
                                  int(sizeof(PeerInfo)), MPI_BYTE, comm_));
    static std::once_flag installed;  // the world group: its ranks are the world's
    if (!is_subgroup_)
      std::call_once(installed, [this] {
        std::vector<std::pair<int, std::string>> pid_host;
        for (const PeerInfo& p : peers_) pid_host.emplace_back(p.pid, std::string(p.host));
        lost_report::install(pid_host, rank_);
      });
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  GroupPtr split(int color, int key) override {
    MPI_Comm sub = MPI_COMM_NULL;
    SPORE_MPI_CHECK(MPI_Comm_split(comm_, color, key, &sub));
    return std::make_shared<MpiGroup>(sub);
  }

  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op) override {
    detail::check_tensor(t, "all_reduce");
    detail::check_mean_dtype(t.dtype(), op, "all_reduce");
    auto w = make_work("all_reduce", t);
    SPORE_MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t, "all_reduce"),
                                   mpi_type(t.dtype()), mpi_op(t.dtype(), op, "all_reduce"), comm_,
                                   &w->req));
    if (op == ReduceOp::Mean) w->done = [t, n = size_] { detail::scale_in_place(t, 1.0 / n); };
    return w;
  }
  // Blocking: MPI_Allreduce itself, with the deadline kept by the watchdog thread (a blocked
  // MPI call cannot be interrupted, so on expiry the watchdog reports the lost rank and exits).
  void all_reduce(const Tensor& t, ReduceOp op) override {
    detail::check_tensor(t, "all_reduce");
    detail::check_mean_dtype(t.dtype(), op, "all_reduce");
    const profiling::Span span("comm", "all_reduce", nullptr, int64_t(t.nbytes()));
    const double timeout = get_comm_timeout();
    if (timeout > 0)
      watchdog_.arm(timeout, [this, timeout, n = t.nbytes()] {
        return lost_message("all_reduce of " + std::to_string(n / 1024) + " KB", -1, timeout);
      });
    const int rc = MPI_Allreduce(MPI_IN_PLACE, t.data_ptr(), count_of(t, "all_reduce"),
                                 mpi_type(t.dtype()), mpi_op(t.dtype(), op, "all_reduce"), comm_);
    if (timeout > 0) watchdog_.disarm();
    if (rc != MPI_SUCCESS) mpi_fail("MPI_Allreduce", rc, __FILE__, __LINE__);
    if (op == ReduceOp::Mean) detail::scale_in_place(t, 1.0 / size_);
  }

  WorkPtr all_gather_async(const Tensor& in, const Tensor& out) override {
    detail::check_tensor(in, "all_gather");
    detail::check_tensor(out, "all_gather");
    SPORE_CHECK(out.numel() == in.numel() * size_ && out.dtype() == in.dtype(),
                "[parallel] all_gather: the output needs ", in.numel() * size_, " ",
                dtype_name(in.dtype()), " elements (", size_, " ranks x ", in.numel(), "), got ",
                out.numel(), " ", dtype_name(out.dtype()));
    auto w = make_work("all_gather", out);
    w->keep.push_back(in);
    SPORE_MPI_CHECK(MPI_Iallgather(in.data_ptr(), count_of(in, "all_gather"), mpi_type(in.dtype()),
                                   out.data_ptr(), count_of(in, "all_gather"), mpi_type(in.dtype()),
                                   comm_, &w->req));
    return w;
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    detail::check_tensor(in, "reduce_scatter");
    detail::check_tensor(out, "reduce_scatter");
    detail::check_mean_dtype(in.dtype(), op, "reduce_scatter");
    SPORE_CHECK(in.numel() == out.numel() * size_ && out.dtype() == in.dtype(),
                "[parallel] reduce_scatter: the input needs ", size_, " x the output's ",
                out.numel(), " elements of one dtype, got ", in.numel(), " ",
                dtype_name(in.dtype()), " -> ", dtype_name(out.dtype()));
    auto w = make_work("reduce_scatter", out);
    w->keep.push_back(in);
    SPORE_MPI_CHECK(MPI_Ireduce_scatter_block(
        in.data_ptr(), out.data_ptr(), count_of(out, "reduce_scatter"), mpi_type(in.dtype()),
        mpi_op(in.dtype(), op, "reduce_scatter"), comm_, &w->req));
    if (op == ReduceOp::Mean) w->done = [out, n = size_] { detail::scale_in_place(out, 1.0 / n); };
    return w;
  }
  WorkPtr all_to_all_async(const Tensor& in, const Tensor& out) override {
    detail::check_tensor(in, "all_to_all");
    detail::check_tensor(out, "all_to_all");
    SPORE_CHECK(
        in.numel() % size_ == 0 && out.numel() == in.numel() && out.dtype() == in.dtype(),
        "[parallel] all_to_all: in and out need the same size, a multiple of the group size ",
        size_, "; got ", in.numel(), " and ", out.numel(), " elements");
    auto w = make_work("all_to_all", in);
    w->keep.push_back(out);
    const int block = int(in.numel() / size_);
    SPORE_MPI_CHECK(MPI_Ialltoall(in.data_ptr(), block, mpi_type(in.dtype()), out.data_ptr(), block,
                                  mpi_type(in.dtype()), comm_, &w->req));
    return w;
  }
  WorkPtr broadcast_async(const Tensor& t, int root) override {
    detail::check_tensor(t, "broadcast");
    check_rank(root, "broadcast");
    auto w = make_work("broadcast", t);
    SPORE_MPI_CHECK(MPI_Ibcast(t.data_ptr(), count_of(t, "broadcast"), mpi_type(t.dtype()), root,
                               comm_, &w->req));
    w->peer = root;
    return w;
  }
  WorkPtr send_async(const Tensor& t, int dst, int tag) override {
    detail::check_tensor(t, "send");
    check_rank(dst, "send");
    auto w = make_work("send", t);
    w->peer = dst;
    SPORE_MPI_CHECK(MPI_Isend(t.data_ptr(), count_of(t, "send"), mpi_type(t.dtype()), dst, tag,
                              comm_, &w->req));
    return w;
  }
  WorkPtr recv_async(const Tensor& t, int src, int tag) override {
    detail::check_tensor(t, "recv");
    check_rank(src, "recv");
    auto w = make_work("recv", t);
    w->peer = src;
    SPORE_MPI_CHECK(MPI_Irecv(t.data_ptr(), count_of(t, "recv"), mpi_type(t.dtype()), src, tag,
                              comm_, &w->req));
    return w;
  }
  void barrier() override {
    auto w = make_work("barrier", Tensor());
    SPORE_MPI_CHECK(MPI_Ibarrier(comm_, &w->req));
    w->wait();
  }

  // The message for a deadline that passed: which ranks look lost. Ranks on this host are checked
  // through /proc (gone, zombie or stopped); otherwise, with two ranks, it is the other one.
  std::string lost_message(const std::string& what, int peer, double timeout) const {
    std::vector<int> suspects;
    std::vector<std::string> why;
    for (int r = 0; r < size_; ++r) {
      if (r == rank_ || host_ != peers_[size_t(r)].host) continue;
      const std::string state = proc_state(peers_[size_t(r)].pid);
      if (state != "running") {
        suspects.push_back(r);
        why.push_back(state);
      }
    }
    if (suspects.empty()) {
      if (peer >= 0)
        suspects.push_back(peer);
      else if (size_ == 2)
        suspects.push_back(1 - rank_);
    }
    std::ostringstream os;
    os << "[parallel] rank " << peers_[size_t(rank_)].world_rank << ": " << what;
    if (is_subgroup_) {  // a sharded layer's collective: say which ranks it spans
      os << " among ranks";
      for (const PeerInfo& p : peers_) os << " " << p.world_rank;
    }
    os << ": ";
    char t[32];
    std::snprintf(t, sizeof(t), "%g", timeout);
    if (suspects.empty()) {
      os << "one of the other " << size_ - 1 << " ranks did not respond within " << t
         << " s (lost?)";
    } else {
      for (size_t i = 0; i < suspects.size(); ++i) {
        const int r = suspects[i];
        os << (i ? "; " : "") << "rank " << peers_[size_t(r)].world_rank
           << " did not respond within " << t << " s (lost?)";
        if (i < why.size())
          os << " - its process " << peers_[size_t(r)].pid << " on " << peers_[size_t(r)].host
             << " " << why[i];
      }
    }
    os << "\nhint: the deadline is set_comm_timeout() / SPORE_COMM_TIMEOUT / spore train "
          "--comm-timeout;"
          " a checkpoint written before the fault can be resumed with spore train --resume FILE";
    return os.str();
  }

  void check_rank(int r, const char* what) const {
    SPORE_CHECK_INDEX(r >= 0 && r < size_, "[parallel] ", what, ": rank ", r, " is not in [0, ",
                      size_, ")");
  }

 private:
  struct MpiWork : Work {
    MPI_Request req = MPI_REQUEST_NULL;
    std::function<void()> done;  // after completion (Mean's scaling)
    std::vector<Tensor> keep;    // buffers MPI reads or writes until completion
    std::shared_ptr<const MpiGroup> group;
    std::string what;
    const char* op = "";  // the collective's name (the profiler's span)
    int64_t bytes = -1;
    int peer = -1;
    bool finished = false;

    bool test() override {
      if (finished) return true;
      int flag = 0;
      const int rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
      if (rc != MPI_SUCCESS) {
        g_broken = true;
        mpi_fail(("MPI_Test (" + what + ")").c_str(), rc, __FILE__, __LINE__);
      }
      if (flag) {
        finished = true;
        if (done) done();
        keep.clear();
      }
      return finished;
    }
    void wait() override {
      const profiling::Span span("comm", op, nullptr, bytes);  // the time a caller waits for it
      using Clock = std::chrono::steady_clock;
      const double timeout = get_comm_timeout();
      const auto t0 = Clock::now();
      for (int spins = 0; !test(); ++spins) {
        // MPI's non-blocking collectives only progress inside MPI_Test, so poll without pause for
        // the first second (a 64 MB all-reduce takes tens of ms and sleeping halves its
        // bandwidth); after that the peer is slow or lost, so leave the core to others.
        if (spins % 256 == 255 && std::chrono::duration<double>(Clock::now() - t0).count() > 1.0)
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        if (timeout > 0 && spins % 64 == 0 &&
            std::chrono::duration<double>(Clock::now() - t0).count() > timeout) {
          g_broken = true;  // MPI's state with a dead peer is unusable; release() must not finalise
          SPORE_THROW(ErrorKind::RuntimeError, group->lost_message(what, peer, timeout));
        }
      }
    }
  };

  std::shared_ptr<MpiWork> make_work(const char* op, const Tensor& t) {
    auto w = std::make_shared<MpiWork>();
    w->group = shared_from_this();
    w->op = op;
    w->bytes = t.defined() ? int64_t(t.nbytes()) : -1;
    w->what = t.defined() ? std::string(op) + " of " + human_bytes(t.nbytes()) + " (" +
                                dtype_name(t.dtype()) + ")"
                          : std::string(op);
    if (t.defined()) w->keep.push_back(t);
    return w;
  }

  static std::string proc_state(int pid) {
    std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
    if (!f) return "has exited";
    std::string s;
    std::getline(f, s);
    const size_t p = s.rfind(')');
    const char st = p != std::string::npos && p + 2 < s.size() ? s[p + 2] : '?';
    if (st == 'Z' || st == 'X') return "has exited";
    if (st == 'T' || st == 't') return "is stopped";
    return "running";
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  bool is_subgroup_ = false;
  int rank_ = 0, size_ = 1;
  Watchdog watchdog_;
  std::string host_;
  std::vector<PeerInfo> peers_;
};

}  // namespace

bool have_mpi() { return true; }
GroupPtr make_mpi_group() { return detail::stage_device_tensors(std::make_shared<MpiGroup>()); }

namespace detail {
void finalize_mpi() {
  if (!g_mpi_started_here || g_finalized || g_broken) return;
  int fin = 0;
  MPI_Finalized(&fin);
  if (!fin) MPI_Finalize();
  g_finalized = true;
}
void abort_mpi(int code) {
  int inited = 0;
  MPI_Initialized(&inited);
  if (inited) MPI_Abort(MPI_COMM_WORLD, code);
}
}  // namespace detail

}  // namespace spore::parallel
