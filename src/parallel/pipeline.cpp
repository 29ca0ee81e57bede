// Pipeline parallelism with the 1F1B schedule (parallel/parallel.h: PipelineTrainer). Each rank
// runs one stage; activations travel forward and their gradients backward by send/recv.
#include <chrono>

#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"
#include "spore/profiler.h"

namespace spore::parallel {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int64_t kMaxDims = 8;
// Message tags: each micro-batch has its own, so a message can never meet the wrong receive.
int tag_of(int64_t micro, int kind) { return int(micro * 4 + kind); }  // 0 header, 1 data, 2 grad

}  // namespace

PipelineTrainer::PipelineTrainer(
    std::vector<nn::CellPtr> stages, nn::CellPtr loss_fn,
    std::function<optim::OptimizerPtr(std::vector<Tensor>)> make_optimizer, int64_t micro_batches,
    GroupPtr group, GroupPtr data_parallel_group)
    : stages_(std::move(stages)),
      loss_fn_(std::move(loss_fn)),
      m_(micro_batches),
      group_(group ? std::move(group) : world()),
      dp_group_(std::move(data_parallel_group)) {
  rank_ = group_->rank();
  size_ = group_->size();
  SPORE_CHECK(
      int64_t(stages_.size()) == size_, "[pipeline] ", stages_.size(), " stages but ", size_,
      " ranks: pipeline_stages must equal the ranks of the job (one stage per rank); launch with "
      "-n ",
      stages_.size(), " or split the network into ", size_, " stages");
  SPORE_CHECK(m_ >= 1, "[pipeline] micro_batches must be >= 1, got ", m_);
  SPORE_CHECK(loss_fn_ != nullptr, "[pipeline] loss_fn is null");
  for (size_t s = 0; s < stages_.size(); ++s)
    SPORE_CHECK(stages_[s] != nullptr, "[pipeline] stage ", s, " is null");
  params_ = stage()->trainable_params();
  SPORE_CHECK(!params_.empty(), "[pipeline] stage ", rank_, " has no trainable parameters");
  opt_ = make_optimizer(params_);
  SPORE_CHECK(opt_ != nullptr, "[pipeline] make_optimizer returned null");
}

// MPI moves a large message only while its sender is inside an MPI call (the rendezvous needs the
// sender's answer), so a send left pending through a compute phase can hold up the next stage for
// that long. Before each compute phase, give the pending sends a turn.
void PipelineTrainer::progress() {
  for (const WorkPtr& w : pending_) w->test();
}

Tensor PipelineTrainer::forward(int64_t i, const Tensor& data, const Tensor& label) {
  const int64_t b = data.shape()[0] / m_;
  Tensor x;
  if (rank_ == 0) {
    x = data.slice(0, i * b, (i + 1) * b).contiguous();
    if (data.requires_grad()) x = x.detach().set_requires_grad(true);  // input_grad() wanted
  } else {
    // The previous stage's activation: a header (ndim, dtype, dims) then the values.
    profiling::Span wait("comm", "pipeline_recv_activation");
    const auto r0 = Clock::now();
    Tensor header = Tensor::empty({2 + kMaxDims}, kInt64);
    group_->recv(header, rank_ - 1, tag_of(i, 0));
    const int64_t* h = header.data<int64_t>();
    Shape shape(h + 2, h + 2 + h[0]);
    x = Tensor::empty(shape, DType(h[1]));
    group_->recv(x, rank_ - 1, tag_of(i, 1));
    stats_.recv_seconds += std::chrono::duration<double>(Clock::now() - r0).count();
    x.set_requires_grad(true);
  }
  progress();
  const auto t0 = Clock::now();
  Tensor y;
  {
    profiling::Span span("train", "pipeline_forward");
    EnableGradGuard grad;
    y = (*stage())(x);
    if (rank_ == size_ - 1) {
      Tensor l = (*loss_fn_)(y, label.slice(0, i * b, (i + 1) * b).contiguous());
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + l.detach() : l.detach();
      y = l * (1.0 / double(m_));  // the micro-batch's share of the batch's mean loss
    }
  }
  stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  if (rank_ < size_ - 1) {
    const Tensor out = y.detach().contiguous();
    SPORE_CHECK(out.dim() <= kMaxDims, "[pipeline] stage ", rank_, " output has ", out.dim(),
                " dims, at most ", kMaxDims, " can be sent");
    Tensor header = zeros({2 + kMaxDims}, kInt64);
    int64_t* h = header.data<int64_t>();
    h[0] = out.dim();
    h[1] = int64_t(out.dtype());
    for (int64_t d = 0; d < out.dim(); ++d) h[2 + d] = out.shape()[size_t(d)];
    // Asynchronous: the next stage may be sending us a gradient at the same time.
    pending_.push_back(group_->send_async(header, rank_ + 1, tag_of(i, 0)));
    pending_.push_back(group_->send_async(out, rank_ + 1, tag_of(i, 1)));
    in_flight_.push_back(header);
    in_flight_.push_back(out);
  }
  inputs_[size_t(i)] = x;
  outputs_[size_t(i)] = y;
  return y;
}

void PipelineTrainer::backward(int64_t i) {
  Tensor sens;
  if (rank_ < size_ - 1) {
    profiling::Span wait("comm", "pipeline_recv_gradient");
    sens = Tensor::empty(outputs_[size_t(i)].shape(), outputs_[size_t(i)].dtype());
    const auto r0 = Clock::now();
    group_->recv(sens, rank_ + 1, tag_of(i, 2));
    stats_.recv_seconds += std::chrono::duration<double>(Clock::now() - r0).count();
  }
  progress();
  const auto t0 = Clock::now();
  std::vector<Tensor> wrt = params_;
  const bool want_input = rank_ > 0 || inputs_[size_t(i)].requires_grad();
  if (want_input) wrt.push_back(inputs_[size_t(i)]);
  std::vector<Tensor> g;
  {
    profiling::Span span("train", "pipeline_backward");
    autograd::GradOptions opts;
    opts.sens = sens;  // the next stage's gradient of our output (undefined on the last: ones)
    g = autograd::grad(outputs_[size_t(i)], wrt, opts);
    for (size_t j = 0; j < params_.size(); ++j)
      grads_[j] = grads_[j].defined() ? grads_[j] + g[j] : g[j];
  }
  stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  if (rank_ > 0) {
    const Tensor gin = g.back().contiguous();
    pending_.push_back(group_->send_async(gin, rank_ - 1, tag_of(i, 2)));
    in_flight_.push_back(gin);
  } else if (want_input) {
    input_grads_[size_t(i)] = g.back();
  }
  inputs_[size_t(i)] = Tensor();  // this micro-batch's activations are no longer needed
  outputs_[size_t(i)] = Tensor();
}

Tensor PipelineTrainer::step(const Tensor& data, const Tensor& label) {
  SPORE_CHECK(data.dim() >= 1 && data.shape()[0] % m_ == 0, "[pipeline] the batch (",
              data.dim() ? data.shape()[0] : 0, " rows) must split into micro_batches = ", m_,
              " equal micro-batches");
  const auto t0 = Clock::now();
  stats_ = {};
  loss_sum_ = Tensor();
  grads_.assign(params_.size(), Tensor());
  inputs_.assign(size_t(m_), Tensor());
  outputs_.assign(size_t(m_), Tensor());
  input_grads_.assign(size_t(m_), Tensor());
  // 1F1B: warm-up forwards, then one forward + one backward, then the remaining backwards.
  const int64_t warm = std::min<int64_t>(size_ - 1 - rank_, m_);
  int64_t f = 0, b = 0;
  for (; f < warm; ++f) forward(f, data, label);
  for (; f < m_; ++f, ++b) {
    forward(f, data, label);
    backward(b);
  }
  for (; b < m_; ++b) backward(b);
  for (const WorkPtr& w : pending_) w->wait();
  pending_.clear();
  in_flight_.clear();
  if (dp_group_ && dp_group_->size() > 1) {  // dp x pipeline: the replicas' mean gradient
    profiling::Span span("comm", "pipeline_dp_all_reduce");
    for (Tensor& g : grads_) {
      g = g.contiguous().clone();
      dp_group_->all_reduce(g, ReduceOp::Mean);
    }
  }
  {
    const auto t1 = Clock::now();
    opt_->step(grads_);
    stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
  }
  // The batch's mean loss, from the last stage to every rank.
  Tensor loss = rank_ == size_ - 1
                    ? (loss_sum_ * (1.0 / double(m_))).to(kFloat32).contiguous().clone()
                    : zeros({}, kFloat32);
  group_->broadcast(loss, size_ - 1);
  if (dp_group_ && dp_group_->size() > 1) dp_group_->all_reduce(loss, ReduceOp::Mean);
  stats_.step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return loss;
}

Tensor PipelineTrainer::input_grad() const {
  if (rank_ != 0 || input_grads_.empty() || !input_grads_[0].defined()) return {};
  return concat(input_grads_, 0);
}

void PipelineTrainer::sync_stages() {
  for (size_t s = 0; s < stages_.size(); ++s)
    for (const auto& p : stages_[s]->parameters_and_buffers()) group_->broadcast(p.second, int(s));
}

}  // namespace spore::parallel
