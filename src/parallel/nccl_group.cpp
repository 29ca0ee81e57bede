// The NCCL group: one NCCL communicator per process over the MPI world (rank 0's ncclUniqueId is
// broadcast through MPI), one CUDA stream. Spore's tensors live on the host for now, so every op
// stages its tensor through stream-ordered device memory (cudaMallocAsync): copy in, collective,
// copy out, an event; Work::test() queries the event and wait() polls it against the deadline.
// Built only when the CUDA toolkit and NCCL are found (SPORE_HAVE_NCCL, which implies MPI).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "parallel/internal.h"
#include "spore/parallel/parallel.h"

#define SPORE_CUDA_CHECK(call)                                                                  \
  do {                                                                                          \
    const cudaError_t e_ = (call);                                                              \
    SPORE_CHECK_KIND(::spore::ErrorKind::RuntimeError, e_ == cudaSuccess, "[parallel] ", #call, \
                     " failed: ", cudaGetErrorString(e_), " (", __FILE__, ":", __LINE__, ")");  \
  } while (0)
#define SPORE_NCCL_CHECK(call)                                                                  \
  do {                                                                                          \
    const ncclResult_t r_ = (call);                                                             \
    SPORE_CHECK_KIND(::spore::ErrorKind::RuntimeError, r_ == ncclSuccess, "[parallel] ", #call, \
                     " failed: ", ncclGetErrorString(r_), " (", __FILE__, ":", __LINE__, ")");  \
  } while (0)

namespace spore::parallel {
namespace {

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case kBool:
    case kUInt8:
      return ncclUint8;
    case kInt8:
      return ncclInt8;
    case kInt32:
      return ncclInt32;
    case kInt64:
      return ncclInt64;
    case kFloat16:
      return ncclFloat16;
    case kBFloat16:
      return ncclBfloat16;
    case kFloat32:
      return ncclFloat32;
    case kFloat64:
      return ncclFloat64;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(DType t, ReduceOp op, const char* what) {
  SPORE_CHECK_TYPE(t != kBool || op == ReduceOp::Max || op == ReduceOp::Min, "[parallel] ", what,
                   ": ", reduce_op_name(op), " of bool is not defined; use max (any) or min (all)");
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Mean:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
  }
  return ncclSum;
}

class NcclGroup : public Group {
 public:
  NcclGroup() : mpi_(make_mpi_group()) {  // MPI brings up the processes and carries the id
    rank_ = mpi_->rank();
    size_ = mpi_->size();
    int devices = 0;
    SPORE_CUDA_CHECK(cudaGetDeviceCount(&devices));
    SPORE_CHECK_KIND(ErrorKind::RuntimeError, devices > 0,
                     "[parallel] init(\"nccl\"): no CUDA device visible");
    SPORE_CUDA_CHECK(cudaSetDevice(rank_ % devices));
    ncclUniqueId id;
    if (rank_ == 0) SPORE_NCCL_CHECK(ncclGetUniqueId(&id));
    Tensor idt = Tensor::empty({int64_t(sizeof(id))}, kUInt8);
    std::memcpy(idt.data_ptr(), &id, sizeof(id));
    mpi_->broadcast(idt, 0);
    std::memcpy(&id, idt.data_ptr(), sizeof(id));
    SPORE_NCCL_CHECK(ncclCommInitRank(&comm_, size_, id, rank_));
    SPORE_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
  }
  ~NcclGroup() override {
    if (comm_) ncclCommDestroy(comm_);
    if (stream_) cudaStreamDestroy(stream_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }

  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op) override {
    detail::check_tensor(t, "all_reduce");
    detail::check_mean_dtype(t.dtype(), op, "all_reduce");
    const ncclRedOp_t nop = nccl_op(t.dtype(), op, "all_reduce");
    return run("all_reduce", t, t, [&](void* in, void* out) {
      return ncclAllReduce(in, out, size_t(t.numel()), nccl_type(t.dtype()), nop, comm_, stream_);
    });
  }
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out) override {
    detail::check_tensor(in, "all_gather");
    detail::check_tensor(out, "all_gather");
    SPORE_CHECK(out.numel() == in.numel() * size_ && out.dtype() == in.dtype(),
                "[parallel] all_gather: the output needs ", in.numel() * size_, " elements, got ",
                out.numel());
    return run("all_gather", in, out, [&](void* i, void* o) {
      return ncclAllGather(i, o, size_t(in.numel()), nccl_type(in.dtype()), comm_, stream_);
    });
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    detail::check_tensor(in, "reduce_scatter");
    detail::check_tensor(out, "reduce_scatter");
    detail::check_mean_dtype(in.dtype(), op, "reduce_scatter");
    SPORE_CHECK(in.numel() == out.numel() * size_ && out.dtype() == in.dtype(),
                "[parallel] reduce_scatter: the input needs ", out.numel() * size_,
                " elements, got ", in.numel());
    const ncclRedOp_t nop = nccl_op(in.dtype(), op, "reduce_scatter");
    return run("reduce_scatter", in, out, [&](void* i, void* o) {
      return ncclReduceScatter(i, o, size_t(out.numel()), nccl_type(in.dtype()), nop, comm_,
                               stream_);
    });
  }
  WorkPtr broadcast_async(const Tensor& t, int root) override {
    detail::check_tensor(t, "broadcast");
    return run("broadcast", t, t, [&](void* i, void* o) {
      return ncclBroadcast(i, o, size_t(t.numel()), nccl_type(t.dtype()), root, comm_, stream_);
    });
  }
  WorkPtr send_async(const Tensor& t, int dst, int) override {
    detail::check_tensor(t, "send");
    return run("send", t, Tensor(), [&](void* i, void*) {
      return ncclSend(i, size_t(t.numel()), nccl_type(t.dtype()), dst, comm_, stream_);
    });
  }
  WorkPtr recv_async(const Tensor& t, int src, int) override {
    detail::check_tensor(t, "recv");
    return run("recv", Tensor(), t, [&](void*, void* o) {
      return ncclRecv(o, size_t(t.numel()), nccl_type(t.dtype()), src, comm_, stream_);
    });
  }
  void barrier() override {
    Tensor one = ones({1});
    all_reduce(one);
  }

 private:
  struct NcclWork : Work {
    cudaEvent_t event = nullptr;
    std::vector<Tensor> keep;
    std::string what;
    int rank = 0;
    bool finished = false;
    ~NcclWork() override {
      if (event) cudaEventDestroy(event);
    }
    bool test() override {
      if (finished) return true;
      const cudaError_t e = cudaEventQuery(event);
      if (e == cudaErrorNotReady) return false;
      SPORE_CUDA_CHECK(e);
      finished = true;
      keep.clear();
      return true;
    }
    void wait() override {
      const double timeout = get_comm_timeout();
      const auto t0 = std::chrono::steady_clock::now();
      while (!test()) {
        std::this_thread::sleep_for(std::chrono::microseconds(20));
        if (timeout > 0 &&
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout)
          SPORE_THROW(ErrorKind::RuntimeError, "[parallel] rank ", rank, ": ", what,
                      ": a peer did not respond within ", timeout, " s (lost?)");
      }
    }
  };

  // Stages in (host) to the device, runs the NCCL call, stages the result back to out (host).
  template <typename F>
  WorkPtr run(const char* what, const Tensor& in, const Tensor& out, F&& call) {
    auto w = std::make_shared<NcclWork>();
    w->what = what;
    w->rank = rank_;
    void *din = nullptr, *dout = nullptr;
    if (in.defined()) {
      SPORE_CUDA_CHECK(cudaMallocAsync(&din, std::max<size_t>(in.nbytes(), 1), stream_));
      SPORE_CUDA_CHECK(
          cudaMemcpyAsync(din, in.data_ptr(), in.nbytes(), cudaMemcpyHostToDevice, stream_));
      w->keep.push_back(in);
    }
    if (out.defined()) {
      if (out.is_same(in))
        dout = din;
      else
        SPORE_CUDA_CHECK(cudaMallocAsync(&dout, std::max<size_t>(out.nbytes(), 1), stream_));
      w->keep.push_back(out);
    }
    SPORE_NCCL_CHECK(call(din, dout));
    if (out.defined())
      SPORE_CUDA_CHECK(
          cudaMemcpyAsync(out.data_ptr(), dout, out.nbytes(), cudaMemcpyDeviceToHost, stream_));
    if (din) SPORE_CUDA_CHECK(cudaFreeAsync(din, stream_));
    if (dout && dout != din) SPORE_CUDA_CHECK(cudaFreeAsync(dout, stream_));
    SPORE_CUDA_CHECK(cudaEventCreateWithFlags(&w->event, cudaEventDisableTiming));
    SPORE_CUDA_CHECK(cudaEventRecord(w->event, stream_));
    return w;
  }

  GroupPtr mpi_;
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

bool have_nccl() { return true; }
GroupPtr make_nccl_group() { return std::make_shared<NcclGroup>(); }

}  // namespace spore::parallel
