// Collectives on device tensors for the groups that move host memory (MPI, the local group): a
// device tensor is copied to the host, the collective runs there, and the result is copied back
// into the device tensor when the work completes (Work::test or wait). Host tensors pass straight
// through. The NCCL group reads device memory itself and is not wrapped.
#include <utility>
#include <vector>

#include "parallel/internal.h"
#include "spore/parallel/parallel.h"

namespace spore::parallel {
namespace {

bool on_device(const Tensor& t) { return t.defined() && t.device().type != DeviceType::CPU; }
Tensor host_copy(const Tensor& t) { return on_device(t) ? t.cpu() : t; }
Tensor host_buffer(const Tensor& t) {
  return on_device(t) ? Tensor::empty(t.shape(), t.dtype()) : t;
}

class StagedWork final : public Work {
 public:
  StagedWork(WorkPtr inner, std::vector<Tensor> hold, std::vector<std::pair<Tensor, Tensor>> back)
      : inner_(std::move(inner)), hold_(std::move(hold)), back_(std::move(back)) {}
  bool test() override {
    if (!inner_->test()) return false;
    finish();
    return true;
  }
  void wait() override {
    inner_->wait();
    finish();
  }

 private:
  void finish() {  // once: the results into their device tensors
    for (auto& [device, host] : back_) device.copy_from_host(host.data_ptr());
    back_.clear();
    hold_.clear();
  }
  WorkPtr inner_;
  std::vector<Tensor> hold_;                     // host buffers the collective reads
  std::vector<std::pair<Tensor, Tensor>> back_;  // (device tensor, host result)
};

// out: the device tensor the collective writes, or a host one (written in place).
WorkPtr staged(WorkPtr inner, std::vector<Tensor> hold, const Tensor& out, const Tensor& host_out) {
  std::vector<std::pair<Tensor, Tensor>> back;
  if (on_device(out)) back.emplace_back(out, host_out);
  if (hold.empty() && back.empty()) return inner;
  return std::make_shared<StagedWork>(std::move(inner), std::move(hold), std::move(back));
}

class HostStagingGroup final : public Group {
 public:
  explicit HostStagingGroup(GroupPtr g) : g_(std::move(g)) {}
  int rank() const override { return g_->rank(); }
  int size() const override { return g_->size(); }
  std::string backend() const override { return g_->backend(); }

  WorkPtr all_reduce_async(const Tensor& t, ReduceOp op) override {
    const Tensor h = host_copy(t);
    return staged(g_->all_reduce_async(h, op), {h}, t, h);
  }
  void all_reduce(const Tensor& t, ReduceOp op) override {
    if (!on_device(t)) return g_->all_reduce(t, op);  // MPI's faster blocking form
    const Tensor h = t.cpu();
    g_->all_reduce(h, op);
    t.copy_from_host(h.data_ptr());
  }
  WorkPtr all_gather_async(const Tensor& in, const Tensor& out) override {
    const Tensor hi = host_copy(in), ho = host_buffer(out);
    return staged(g_->all_gather_async(hi, ho), {hi, ho}, out, ho);
  }
  WorkPtr reduce_scatter_async(const Tensor& in, const Tensor& out, ReduceOp op) override {
    const Tensor hi = host_copy(in), ho = host_buffer(out);
    return staged(g_->reduce_scatter_async(hi, ho, op), {hi, ho}, out, ho);
  }
  WorkPtr all_to_all_async(const Tensor& in, const Tensor& out) override {
    const Tensor hi = host_copy(in), ho = host_buffer(out);
    return staged(g_->all_to_all_async(hi, ho), {hi, ho}, out, ho);
  }
  WorkPtr broadcast_async(const Tensor& t, int root) override {
    const Tensor h = host_copy(t);
    return staged(g_->broadcast_async(h, root), {h}, t, h);
  }
  WorkPtr send_async(const Tensor& t, int dst, int tag) override {
    const Tensor h = host_copy(t);
    return staged(g_->send_async(h, dst, tag), {h}, Tensor(), Tensor());
  }
  WorkPtr recv_async(const Tensor& t, int src, int tag) override {
    const Tensor h = host_buffer(t);
    return staged(g_->recv_async(h, src, tag), {h}, t, h);
  }
  void barrier() override { g_->barrier(); }
  std::shared_ptr<Group> split(int color, int key) override {
    return detail::stage_device_tensors(g_->split(color, key));
  }

 private:
  GroupPtr g_;
};

}  // namespace

namespace detail {
GroupPtr stage_device_tensors(GroupPtr host_group) {
  return std::make_shared<HostStagingGroup>(std::move(host_group));
}
}  // namespace detail

}  // namespace spore::parallel
