// The backend-independent part of parallel/: the communication deadline, the one-process group,
// init() / release() / world(), the auto-parallel context. MPI and NCCL groups are in
// mpi_group.cpp and nccl_group.cpp (built only when found; see have_mpi / have_nccl).
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "parallel/internal.h"
#include "spore/parallel/parallel.h"

namespace spore::parallel {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Mean:
      return "mean";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
  }
  return "?";
}

namespace {
double env_timeout() {
  if (const char* s = std::getenv("SPORE_COMM_TIMEOUT")) {
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s) return v;
  }
  return 60.0;
}
double g_timeout = env_timeout();
}  // namespace

void set_comm_timeout(double seconds) { g_timeout = seconds; }
double get_comm_timeout() { return g_timeout; }

std::shared_ptr<Group> Group::split(int, int) {
  SPORE_THROW(
      ErrorKind::NotImplemented, "[parallel] the ", backend(),
      " group cannot form subgroups yet; operator-level sharding needs them (use the MPI group)");
}

namespace {
struct FinishedWork : Work {
  bool test() override { return true; }
  void wait() override {}
};
}  // namespace

WorkPtr Group::all_to_all_async(const Tensor& in, const Tensor& out) {
  detail::check_tensor(in, "all_to_all");
  detail::check_tensor(out, "all_to_all");
  const int64_t n = size();
  SPORE_CHECK(in.numel() % n == 0 && out.numel() == in.numel() && out.dtype() == in.dtype(),
              "[parallel] all_to_all: in and out need the same size, a multiple of the group size ",
              n, "; got ", in.numel(), " and ", out.numel(), " elements");
  const Tensor all = all_gather(in);  // (n, in...): keep block rank() of every rank's input
  const size_t block = in.nbytes() / size_t(n);
  auto* src = static_cast<const char*>(all.data_ptr());
  auto* dst = static_cast<char*>(out.data_ptr());
  for (int64_t r = 0; r < n; ++r)
    std::memcpy(dst + size_t(r) * block, src + size_t(r) * in.nbytes() + size_t(rank()) * block,
                block);
  return std::make_shared<FinishedWork>();
}

Tensor Group::all_gather(const Tensor& in) {
  Shape shape = in.shape();
  shape.insert(shape.begin(), size());
  Tensor out = Tensor::empty(shape, in.dtype(), in.device());  // where `in` is
  all_gather(in, out);
  return out;
}

namespace detail {

void check_tensor(const Tensor& t, const char* op) {
  SPORE_CHECK(t.defined(), "[parallel] ", op, ": the tensor is undefined");
  SPORE_CHECK(t.is_contiguous(), "[parallel] ", op,
              " works in place on a contiguous tensor, got shape ", shape_str(t.shape()),
              " with strides ", shape_str(t.strides()), "; pass t.contiguous() and use the result");
}

void check_mean_dtype(DType dt, ReduceOp op, const char* what) {
  SPORE_CHECK_TYPE(dt != kBool || op == ReduceOp::Max || op == ReduceOp::Min, "[parallel] ", what,
                   ": ", reduce_op_name(op), " of bool is not defined; use max (any) or min (all)");
  SPORE_CHECK_TYPE(op != ReduceOp::Mean || is_floating(dt), "[parallel] ", what,
                   ": mean needs a floating dtype, got ", dtype_name(dt), "; use sum");
}

void scale_in_place(const Tensor& t, double s) {
  visit_dtype(t.dtype(), [&](auto v) {
    using T = decltype(v);
    T* p = static_cast<T*>(t.data_ptr());
    const int64_t n = t.numel();
    if constexpr (std::is_same_v<T, double>) {
      for (int64_t i = 0; i < n; ++i) p[i] *= s;
    } else if constexpr (std::is_same_v<T, float> || std::is_same_v<T, Half> ||
                         std::is_same_v<T, BFloat16>) {
      const float fs = float(s);
      for (int64_t i = 0; i < n; ++i) p[i] = T(float(p[i]) * fs);
    }
  });
}

}  // namespace detail

// ---- the one-process group ----------------------------------------------------------------------

namespace {
class DoneWork : public Work {
 public:
  bool test() override { return true; }
  void wait() override {}
};

class LocalGroup : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op) override {
    detail::check_tensor(t, "all_reduce");
    detail::check_mean_dtype(t.dtype(), op, "all_reduce");
    return done();
  }
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out) override {
    detail::check_tensor(in, "all_gather");
    detail::check_tensor(out, "all_gather");
    SPORE_CHECK(out.numel() == in.numel() && out.dtype() == in.dtype(),
                "[parallel] all_gather: the output needs ", in.numel(), " ", dtype_name(in.dtype()),
                " elements (size x input), got ", out.numel(), " ", dtype_name(out.dtype()));
    std::memcpy(out.data_ptr(), in.data_ptr(), in.nbytes());
    return done();
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    detail::check_tensor(in, "reduce_scatter");
    detail::check_tensor(out, "reduce_scatter");
    detail::check_mean_dtype(in.dtype(), op, "reduce_scatter");
    SPORE_CHECK(out.numel() == in.numel() && out.dtype() == in.dtype(),
                "[parallel] reduce_scatter: the output needs ", in.numel(), " elements, got ",
                out.numel());
    std::memcpy(out.data_ptr(), in.data_ptr(), in.nbytes());
    return done();
  }
  WorkPtr broadcast_async(const Tensor& t, int root) override {
    detail::check_tensor(t, "broadcast");
    SPORE_CHECK_INDEX(root == 0, "[parallel] broadcast: root ", root,
                      " is not a rank of a group of 1");
    return done();
  }
  WorkPtr send_async(const Tensor&, int dst, int) override {
    SPORE_THROW(ErrorKind::ValueError, "[parallel] send to rank ", dst,
                ": a group of one process has no peer");
  }
  WorkPtr recv_async(const Tensor&, int src, int) override {
    SPORE_THROW(ErrorKind::ValueError, "[parallel] recv from rank ", src,
                ": a group of one process has no peer");
  }
  void barrier() override {}
  GroupPtr split(int, int) override { return std::make_shared<LocalGroup>(); }

 private:
  static WorkPtr done() { return std::make_shared<DoneWork>(); }
};

std::mutex g_mu;
GroupPtr g_world;
AutoParallelContext g_ctx;
}  // namespace

GroupPtr make_local_group() { return detail::stage_device_tensors(std::make_shared<LocalGroup>()); }

std::pair<int, int> launcher_rank_size() {
  for (auto [r, s] : {std::pair{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"},
                      std::pair{"PMI_RANK", "PMI_SIZE"}, std::pair{"PMIX_RANK", "PMIX_SIZE"}}) {
    const char* rs = std::getenv(r);
    const char* ss = std::getenv(s);
    if (rs && ss) return {std::atoi(rs), std::max(1, std::atoi(ss))};
  }
  return {0, 1};
}

void init(const std::string& backend) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_world) return;
  if (backend == "local") {
    g_world = make_local_group();
  } else if (backend == "mpi" || backend == "nccl") {
    // Not started by mpirun / spore launch: one process, no MPI singleton (it would fork a
    // runtime daemon for nothing).
    if (launcher_rank_size().second == 1 && !std::getenv("OMPI_COMM_WORLD_SIZE"))
      g_world = make_local_group();
    else
      g_world = backend == "mpi" ? make_mpi_group() : make_nccl_group();
  } else {
    SPORE_THROW(ErrorKind::ValueError, "[parallel] init: unknown backend '", backend,
                "'; expected mpi, nccl or local");
  }
}

bool is_initialized() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_world != nullptr;
}

void release() {
  GroupPtr g;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    g = std::move(g_world);
  }
  if (g && g->backend() != "local") detail::finalize_mpi();
}

void abort(int code) {
  if (is_initialized() && world()->backend() != "local") detail::abort_mpi(code);
  std::_Exit(code);
}

GroupPtr world() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_world) return make_local_group();
  return g_world;
}
int get_rank() { return world()->rank(); }
int get_group_size() { return world()->size(); }

void set_auto_parallel_context(const AutoParallelContext& ctx) {
  SPORE_CHECK(ctx.comm_fusion.bucket_mb >= 0,
              "[set_auto_parallel_context] comm_fusion.bucket_mb must be >= 0, got ",
              ctx.comm_fusion.bucket_mb);
  for (size_t i = 1; i < ctx.comm_fusion.fusion_indices.size(); ++i)
    SPORE_CHECK(ctx.comm_fusion.fusion_indices[i] > ctx.comm_fusion.fusion_indices[i - 1],
                "[set_auto_parallel_context] comm_fusion.fusion_indices must increase");
  SPORE_CHECK(ctx.gradient_accumulation_steps >= 1,
              "[set_auto_parallel_context] gradient_accumulation_steps must be >= 1, got ",
              ctx.gradient_accumulation_steps, " (1 updates on every batch)");
  SPORE_CHECK(ctx.device_num >= 0,
              "[set_auto_parallel_context] device_num must be >= 0 (0: the group size), got ",
              ctx.device_num);
  for (const auto& entry : ctx.dataset_strategy)
    for (int64_t v : entry)
      SPORE_CHECK(v >= 1,
                  "[set_auto_parallel_context] dataset_strategy entries must be >= 1 pieces, got ",
                  v);
  SPORE_CHECK(ctx.pipeline_stages >= 1,
              "[set_auto_parallel_context] pipeline_stages must be >= 1, got ",
              ctx.pipeline_stages);
  SPORE_CHECK(ctx.micro_batch_num >= 0,
              "[set_auto_parallel_context] micro_batch_num must be >= 0 (0: twice the "
              "stages), got ",
              ctx.micro_batch_num);
  SPORE_CHECK(ctx.search_mode == "sharding_propagation" ||
                  ctx.search_mode == "recursive_programming" ||
                  ctx.search_mode == "dynamic_programming",
              "[set_auto_parallel_context] search_mode '", ctx.search_mode,
              "' is unknown; use 'sharding_propagation' (or MindSpore's 'recursive_programming' / "
              "'dynamic_programming', which run the same search here)");
  SPORE_CHECK(
      ctx.parallel_mode != ParallelMode::AutoParallel || ctx.pipeline_stages == 1,
      "[set_auto_parallel_context] auto_parallel with pipeline_stages = ", ctx.pipeline_stages,
      " is not supported yet: the strategy search runs on one sharded region. Use "
      "semi_auto_parallel with shard() inside the stages, or pipeline_stages = 1");
  g_ctx = ctx;
}
const AutoParallelContext& get_auto_parallel_context() { return g_ctx; }
void reset_auto_parallel_context() { g_ctx = {}; }

#ifndef SPORE_HAVE_MPI
bool have_mpi() { return false; }
GroupPtr make_mpi_group() {
  SPORE_THROW(ErrorKind::NotImplemented,
              "[parallel] this build has no MPI; install libopenmpi-dev "
              "(scripts/setup.sh) and re-run cmake with -DSPORE_MPI=ON");
}
namespace detail {
void finalize_mpi() {}
void abort_mpi(int) {}
}  // namespace detail
#endif
#ifndef SPORE_HAVE_NCCL
bool have_nccl() { return false; }
GroupPtr make_nccl_group() {
  SPORE_THROW(ErrorKind::NotImplemented,
              "[parallel] this build has no NCCL (it needs the CUDA "
              "toolkit and libnccl at configure time); use init(\"mpi\")");
}
#endif

}  // namespace spore::parallel
