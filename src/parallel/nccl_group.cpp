// The NCCL group: one NCCL communicator per process over the MPI world (rank 0's ncclUniqueId is
// broadcast through MPI), one communication stream. A GPU tensor (on this rank's GPU) is used in
// place: the communication stream waits for the work queued so far on the tensor's stream, and
// Work::wait() makes that stream wait for the collective, not the host (PyTorch's semantics). A
// host tensor is staged through stream-ordered device memory (cudaMallocAsync): copy in,
// collective, copy out, an event; its Work::wait() polls the event against the deadline.
// Built only when the CUDA toolkit and NCCL are found (SPORE_HAVE_NCCL, which implies MPI).
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <thread>

#include "backends/backend.h"
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
    device_ = rank_ % devices;
    SPORE_CUDA_CHECK(cudaSetDevice(device_));
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
    // Device tensors: the stream the results are used on, made to wait for the collective on the
    // device (wait(), or at the latest when the work is dropped, so that no later work, nor a reuse
    // of the tensors' memory, runs before the collective is done).
    cudaStream_t consumer = nullptr;
    bool ordered = false;
    ~NcclWork() override {
      if (consumer && !ordered) cudaStreamWaitEvent(consumer, event, 0);
      if (event) cudaEventDestroy(event);
    }
    bool test() override {
      if (finished) return true;
      const cudaError_t e = cudaEventQuery(event);
      if (e == cudaErrorNotReady) {
        (void)cudaGetLastError();  // an answer, not an error to report at the next launch
        return false;
      }
      SPORE_CUDA_CHECK(e);
      finished = true;
      keep.clear();
      return true;
    }
    void wait() override {
      if (consumer) {  // PyTorch's semantics for device tensors: the stream waits, not the host
        if (!ordered) SPORE_CUDA_CHECK(cudaStreamWaitEvent(consumer, event, 0));
        ordered = true;
        return;
      }
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

  // A GPU tensor is used in place; a host tensor is staged through stream-ordered device memory
  // (copied in, and the result copied back to it).
  template <typename F>
  WorkPtr run(const char* what, const Tensor& in, const Tensor& out, F&& call) {
    SPORE_CUDA_CHECK(cudaSetDevice(device_));  // this thread may have another current device
    auto w = std::make_shared<NcclWork>();
    w->what = what;
    w->rank = rank_;
    int device = -1;
    for (const Tensor* t : {&in, &out}) {
      if (!t->defined() || t->device().type == DeviceType::CPU) continue;
      SPORE_CHECK(t->device().type == DeviceType::GPU && t->device().index == device_,
                  "[parallel] ", what, " (nccl): rank ", rank_, " communicates on GPU:", device_,
                  ", got a tensor on ", to_string(t->device()),
                  "; move it there (Tensor::to) or use the host");
      device = t->device().index;
    }
    if (device >= 0) {
      // The collective starts after the work queued so far on the tensors' stream.
      w->consumer = static_cast<cudaStream_t>(
          current_stream(Device{DeviceType::GPU, device}).native_handle());
      cudaEvent_t ready;
      SPORE_CUDA_CHECK(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming));
      SPORE_CUDA_CHECK(cudaEventRecord(ready, w->consumer));
      SPORE_CUDA_CHECK(cudaStreamWaitEvent(stream_, ready, 0));
      SPORE_CUDA_CHECK(cudaEventDestroy(ready));  // released once the wait is done
    }
    auto on_gpu = [](const Tensor& t) { return t.device().type == DeviceType::GPU; };
    void *din = nullptr, *dout = nullptr;
    bool own_in = false, own_out = false;
    if (in.defined()) {
      if (on_gpu(in)) {
        din = in.data_ptr();
      } else {
        SPORE_CUDA_CHECK(cudaMallocAsync(&din, std::max<size_t>(in.nbytes(), 1), stream_));
        SPORE_CUDA_CHECK(
            cudaMemcpyAsync(din, in.data_ptr(), in.nbytes(), cudaMemcpyHostToDevice, stream_));
        own_in = true;
      }
      w->keep.push_back(in);
    }
    if (out.defined()) {
      if (out.is_same(in)) {
        dout = din;
      } else if (on_gpu(out)) {
        dout = out.data_ptr();
      } else {
        SPORE_CUDA_CHECK(cudaMallocAsync(&dout, std::max<size_t>(out.nbytes(), 1), stream_));
        own_out = true;
      }
      w->keep.push_back(out);
    }
    SPORE_NCCL_CHECK(call(din, dout));
    if (out.defined() && !on_gpu(out))
      SPORE_CUDA_CHECK(
          cudaMemcpyAsync(out.data_ptr(), dout, out.nbytes(), cudaMemcpyDeviceToHost, stream_));
    if (own_in) SPORE_CUDA_CHECK(cudaFreeAsync(din, stream_));
    if (own_out) SPORE_CUDA_CHECK(cudaFreeAsync(dout, stream_));
    SPORE_CUDA_CHECK(cudaEventCreateWithFlags(&w->event, cudaEventDisableTiming));
    SPORE_CUDA_CHECK(cudaEventRecord(w->event, stream_));
    return w;
  }

  GroupPtr mpi_;
  int rank_ = 0, size_ = 1;
  int device_ = 0;  // this rank's GPU
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
};

}  // namespace

bool have_nccl() { return true; }
GroupPtr make_nccl_group() { return std::make_shared<NcclGroup>(); }

}  // namespace spore::parallel
