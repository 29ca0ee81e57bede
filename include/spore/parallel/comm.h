// Communication: a Group of processes (MindSpore's communication.management / HCCL group) and the
// collectives data parallelism needs. Implementations: MPI (src/parallel/mpi_group.cpp, CPU
// tensors) and NCCL (src/parallel/nccl_group.cpp, built when CUDA and NCCL are found). Every op
// works in place on a contiguous tensor and has an asynchronous form returning a Work handle;
// Work::wait() waits with the group's deadline (set_comm_timeout), so a lost peer is an Error
// naming it, never a hang:
//   auto g = parallel::world();
//   g->all_reduce(grad, ReduceOp::Mean);             // blocking
//   auto w = g->all_reduce_async(bucket);  ...; w->wait();
// To add a backend: derive from Group, implement the *_async ops and barrier().
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore::parallel {

enum class ReduceOp { Sum, Mean, Max, Min };
const char* reduce_op_name(ReduceOp op);

// A pending communication. wait() blocks until done (or throws when the deadline passes: the
// peers did not answer); test() polls and drives progress. Waiting twice is a no-op.
class Work {
 public:
  virtual ~Work() = default;
  virtual bool test() = 0;
  virtual void wait() = 0;
};
using WorkPtr = std::shared_ptr<Work>;

class Group {
 public:
  virtual ~Group() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "mpi", "nccl", "local"

  // In place on `t` (contiguous, same shape and dtype on every rank). Mean is Sum / size, for
  // floating dtypes. Bool: Max is "any", Min is "all".
  virtual WorkPtr all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  // out (size * in.numel() elements, rank-major) = every rank's `in`.
  virtual WorkPtr all_gather_async(const Tensor& in, const Tensor& out) = 0;
  // out (in.numel() / size elements) = this rank's block of the reduction of `in`.
  virtual WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out,
                                       ReduceOp op = ReduceOp::Sum) = 0;
  // in and out: size blocks of equal length, rank-major; rank r's block j goes to rank j, which
  // stores it as its block r. Default: an all-gather of the whole of `in` (size times the traffic).
  virtual WorkPtr all_to_all_async(const Tensor& in, const Tensor& out);
  virtual WorkPtr broadcast_async(const Tensor& t, int root = 0) = 0;
  virtual WorkPtr send_async(const Tensor& t, int dst, int tag = 0) = 0;
  virtual WorkPtr recv_async(const Tensor& t, int src, int tag = 0) = 0;
  virtual void barrier() = 0;
  // A subgroup (MPI_Comm_split): the ranks calling with the same color form one group, ordered by
  // key. Every rank of this group must call it, in the same order as the others.
  virtual std::shared_ptr<Group> split(int color, int key);

  // Blocking forms.
  // Virtual: MPI's blocking all-reduce is about 2x faster than its non-blocking one for large
  // messages (OpenMPI's tuned vs libnbc algorithms), so the MPI group overrides it.
  virtual void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) {
    all_reduce_async(t, op)->wait();
  }
  void all_gather(const Tensor& in, const Tensor& out) { all_gather_async(in, out)->wait(); }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op = ReduceOp::Sum) {
    reduce_scatter_async(in, out, op)->wait();
  }
  void all_to_all(const Tensor& in, const Tensor& out) { all_to_all_async(in, out)->wait(); }
  void broadcast(const Tensor& t, int root = 0) { broadcast_async(t, root)->wait(); }
  void send(const Tensor& t, int dst, int tag = 0) { send_async(t, dst, tag)->wait(); }
  void recv(const Tensor& t, int src, int tag = 0) { recv_async(t, src, tag)->wait(); }
  // Returns a new tensor: all_gather of `in`, shaped (size, in.shape()...).
  Tensor all_gather(const Tensor& in);
};
using GroupPtr = std::shared_ptr<Group>;

// Seconds a Work::wait() waits before it reports the peers as lost (default 60; the environment
// variable SPORE_COMM_TIMEOUT overrides the default). <= 0: wait forever.
void set_comm_timeout(double seconds);
double get_comm_timeout();

// A group of one process: every collective is the identity (Mean, Max... of one value).
GroupPtr make_local_group();
// The MPI world (MPI_COMM_WORLD); initialises MPI on first use. Error when built without MPI.
// It (and the local group) takes device tensors too, staged through the host: copied out, the
// collective on the host, the result copied back into the device tensor when the work completes.
GroupPtr make_mpi_group();
// An NCCL communicator over the MPI world (the unique id goes through MPI); tensors may live on
// the host (staged through the GPU) or this rank's GPU (used in place; Work::wait() then makes the
// tensor's stream wait for the collective, not the host). Error when built without NCCL.
GroupPtr make_nccl_group();
bool have_mpi();   // built with MPI
bool have_nccl();  // built with NCCL

}  // namespace spore::parallel
