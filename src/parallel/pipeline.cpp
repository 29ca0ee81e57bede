// Pipeline parallelism with the 1F1B schedule (parallel/parallel.h: PipelineTrainer). Each rank
// owns one stage (its weights, optimizer state and activations); activations travel forward and
// their gradients backward by send/recv.
#include <algorithm>
#include <chrono>

#include "spore/allocator.h"
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

void release_storage(Tensor& t) {
  SPORE_CHECK(t.defined(), "[pipeline] release_storage: the tensor is undefined");
  TensorImpl& impl = t.impl();  // in place: every holder (cells, lists) sees it released
  impl.storage = nullptr;
  impl.grad = nullptr;
}

bool is_released(const Tensor& t) {
  return t.defined() && t.impl().storage == nullptr && t.impl().traced == nullptr;
}

PipelineTrainer::PipelineTrainer(std::vector<nn::CellPtr> stages, nn::CellPtr loss_fn,
                                 MakeOptimizer make_optimizer, int64_t micro_batches,
                                 GroupPtr group, GroupPtr data_parallel_group)
    : loss_fn_(std::move(loss_fn)),
      m_(micro_batches),
      group_(group ? std::move(group) : world()),
      dp_group_(std::move(data_parallel_group)) {
  rank_ = group_->rank();
  size_ = group_->size();
  SPORE_CHECK(
      int64_t(stages.size()) == size_, "[pipeline] ", stages.size(), " stages but ", size_,
      " ranks: pipeline_stages must equal the ranks of the job (one stage per rank); launch with "
      "-n ",
      stages.size(), " or split the network into ", size_, " stages");
  for (size_t s = 0; s < stages.size(); ++s)
    SPORE_CHECK(stages[s] != nullptr, "[pipeline] stage ", s, " is null");
  stage_ = stages[size_t(rank_)];
  // This rank owns its stage only: free the other stages' weights (a tensor shared with this
  // stage, a tied weight, stays).
  std::vector<Tensor> own;
  for (const auto& [name, t] : stage_->parameters_and_buffers()) own.push_back(t);
  auto owned = [&](const Tensor& t) {
    return std::any_of(own.begin(), own.end(), [&](const Tensor& o) { return o.is_same(t); });
  };
  for (size_t s = 0; s < stages.size(); ++s) {
    if (int(s) == rank_) continue;
    for (auto& [name, t] : stages[s]->parameters_and_buffers())
      if (!owned(t) && !is_released(t)) release_storage(t);
  }
  init(std::move(make_optimizer));
}

PipelineTrainer::PipelineTrainer(const std::function<nn::CellPtr(int64_t)>& build_stage,
                                 int64_t num_stages, nn::CellPtr loss_fn,
                                 MakeOptimizer make_optimizer, int64_t micro_batches,
                                 GroupPtr group, GroupPtr data_parallel_group)
    : loss_fn_(std::move(loss_fn)),
      m_(micro_batches),
      group_(group ? std::move(group) : world()),
      dp_group_(std::move(data_parallel_group)) {
  rank_ = group_->rank();
  size_ = group_->size();
  SPORE_CHECK(num_stages == size_, "[pipeline] ", num_stages, " stages but ", size_,
              " ranks: pipeline_stages must equal the ranks of the job (one stage per rank); "
              "launch with -n ",
              num_stages, " or split the network into ", size_, " stages");
  SPORE_CHECK(build_stage != nullptr, "[pipeline] build_stage is empty");
  stage_ = build_stage(rank_);
  SPORE_CHECK(stage_ != nullptr, "[pipeline] build_stage(", rank_, ") returned null");
  init(std::move(make_optimizer));
}

void PipelineTrainer::init(MakeOptimizer make_optimizer) {
  // Steps' message tags are micro * 4 + kind; predict()'s start at 16000.
  SPORE_CHECK(m_ >= 1 && m_ < 4000, "[pipeline] micro_batches must be in 1 .. 3999, got ", m_);
  SPORE_CHECK(loss_fn_ != nullptr, "[pipeline] loss_fn is null");
  params_ = stage_->trainable_params();
  SPORE_CHECK(!params_.empty(), "[pipeline] stage ", rank_, " has no trainable parameters");
  opt_ = make_optimizer(params_);
  SPORE_CHECK(opt_ != nullptr, "[pipeline] make_optimizer returned null");
}

PipelineMemory PipelineTrainer::memory() const {
  PipelineMemory m;
  for (const auto& [name, t] : stage_->parameters_and_buffers())
    m.parameter_bytes += size_t(t.numel()) * itemsize(t.dtype());
  m.optimizer_bytes = optimizer_state_bytes(*opt_);
  m.peak_step_bytes = stats_.peak_step_bytes;
  return m;
}

// MPI moves a large message only while its sender is inside an MPI call (the rendezvous needs the
// sender's answer), so a send left pending through a compute phase can hold up the next stage for
// that long. Before each compute phase, give the pending sends a turn.
void PipelineTrainer::progress() {
  std::erase_if(pending_, [](const std::pair<WorkPtr, Tensor>& p) { return p.first->test(); });
}

// An activation travels as a header (ndim, dtype, dims) then the values, so the receiver needs no
// knowledge of the sender's shapes.
void PipelineTrainer::send_activation(const Tensor& y, int tag_header, int tag_data) {
  const Tensor out = y.detach().contiguous();
  SPORE_CHECK(out.dim() <= kMaxDims, "[pipeline] stage ", rank_, " output has ", out.dim(),
              " dims, at most ", kMaxDims, " can be sent");
  Tensor header = zeros({2 + kMaxDims}, kInt64);
  int64_t* h = header.data<int64_t>();
  h[0] = out.dim();
  h[1] = int64_t(out.dtype());
  for (int64_t d = 0; d < out.dim(); ++d) h[2 + d] = out.shape()[size_t(d)];
  // Asynchronous: the next stage may be sending us a gradient at the same time.
  pending_.emplace_back(group_->send_async(header, rank_ + 1, tag_header), header);
  pending_.emplace_back(group_->send_async(out, rank_ + 1, tag_data), out);
}

Tensor PipelineTrainer::recv_activation(int tag_header, int tag_data) {
  Tensor header = Tensor::empty({2 + kMaxDims}, kInt64);
  group_->recv(header, rank_ - 1, tag_header);
  const int64_t* h = header.data<int64_t>();
  Shape shape(h + 2, h + 2 + h[0]);
  Tensor x = Tensor::empty(shape, DType(h[1]));
  group_->recv(x, rank_ - 1, tag_data);
  return x;
}

Tensor PipelineTrainer::forward(int64_t i, const Tensor& data, const Tensor& label) {
  Tensor x;
  if (rank_ == 0) {
    const int64_t b = data.shape()[0] / m_;
    x = data.slice(0, i * b, (i + 1) * b).contiguous();
    if (data.requires_grad()) x = x.detach().set_requires_grad(true);  // input_grad() wanted
  } else {
    // The previous stage's activation: a header (ndim, dtype, dims) then the values.
    profiling::Span wait("comm", "pipeline_recv_activation");
    const auto r0 = Clock::now();
    x = recv_activation(tag_of(i, 0), tag_of(i, 1));
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
      const int64_t b = label.shape()[0] / m_;
      // A half-precision output (amp O2 / O3) reaches the loss in float32, as amp's output cast
      // does in one process.
      if (y.dtype() == kFloat16 || y.dtype() == kBFloat16) y = y.to(kFloat32);
      Tensor l = (*loss_fn_)(y, label.slice(0, i * b, (i + 1) * b).contiguous());
      loss_sum_ = loss_sum_.defined() ? loss_sum_ + l.detach() : l.detach();
      // The micro-batch's share of the batch's mean loss, times the loss scale (1 without amp).
      y = l * (scale_ / double(m_));
    }
  }
  stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  if (rank_ < size_ - 1) send_activation(y, tag_of(i, 0), tag_of(i, 1));
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
    pending_.emplace_back(group_->send_async(gin, rank_ - 1, tag_of(i, 2)), gin);
  } else if (want_input) {
    input_grads_[size_t(i)] = scale_ == 1.0 ? g.back() : g.back() * (1.0 / scale_);
  }
  inputs_[size_t(i)] = Tensor();  // this micro-batch's activations are no longer needed
  outputs_[size_t(i)] = Tensor();
}

Tensor PipelineTrainer::step(const Tensor& data, const Tensor& label) {
  // Stage 0 reads the data, the last stage the labels; a middle stage reads neither.
  auto check_rows = [&](const Tensor& t, const char* what) {
    SPORE_CHECK(t.defined() && t.dim() >= 1, "[pipeline] stage ", rank_, " needs the ", what,
                ", got ", t.defined() ? "a scalar" : "an undefined tensor");
    SPORE_CHECK(t.shape()[0] % m_ == 0, "[pipeline] the batch's ", what, " (", t.shape()[0],
                " rows) must split into micro_batches = ", m_,
                " equal micro-batches; make the batch a multiple of ", m_);
  };
  if (rank_ == 0) check_rows(data, "data");
  if (rank_ == size_ - 1) check_rows(label, "labels");
  const auto t0 = Clock::now();
  stats_ = {};
  scale_ = scale_manager_ ? scale_manager_->get_loss_scale() : 1.0;
  // The step's working memory: the allocator's peak above what is in use now.
  Allocator& alloc = cpu_allocator();
  const size_t resting = alloc.stats().bytes_in_use;
  alloc.reset_peak();
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
  for (const auto& p : pending_) p.first->wait();
  pending_.clear();
  apply_update();
  grads_.assign(params_.size(), Tensor());
  stats_.peak_step_bytes = alloc.stats().peak_bytes_in_use - resting;
  // The batch's mean loss, from the last stage to every rank.
  Tensor loss = rank_ == size_ - 1
                    ? (loss_sum_ * (1.0 / double(m_))).to(kFloat32).contiguous().clone()
                    : zeros({}, kFloat32);
  group_->broadcast(loss, size_ - 1);
  if (dp_group_ && dp_group_->size() > 1) dp_group_->all_reduce(loss, ReduceOp::Mean);
  stats_.step_seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return loss;
}

void PipelineTrainer::set_grad_accumulation(int64_t k) {
  SPORE_CHECK(k >= 1, "[pipeline] gradient accumulation steps must be >= 1, got ", k,
              "; use 1 to update on every step");
  SPORE_CHECK(accum_done_ == 0,
              "[pipeline] cannot change gradient accumulation in the middle of "
              "an accumulation (",
              accum_done_, " of ", accum_steps_,
              " steps done); change it "
              "after an update");
  accum_steps_ = k;
  accum_.clear();
  if (k > 1)
    for (const Tensor& p : params_) accum_.push_back(zeros_like(p));
}

void PipelineTrainer::set_loss_scale_manager(amp::LossScaleManagerPtr manager) {
  scale_manager_ = std::move(manager);
}

void PipelineTrainer::apply_update() {
  const auto t1 = Clock::now();
  // dp x pipeline: the replicas' mean gradient (a sharded optimizer over the replicas reduces the
  // gradients itself, by a reduce-scatter).
  const bool sharded = dynamic_cast<const ShardedOptimizer*>(opt_.get()) != nullptr;
  if (dp_group_ && dp_group_->size() > 1 && !sharded) {
    profiling::Span span("comm", "pipeline_dp_all_reduce");
    for (Tensor& g : grads_) {
      g = g.contiguous().clone();
      dp_group_->all_reduce(g, ReduceOp::Mean);
    }
  }
  bool use = true;
  last_overflow_ = false;
  if (scale_manager_) {
    NoGradGuard no_grad;
    const Tensor inv = reciprocal(scalar_tensor(scale_, kFloat32));
    for (Tensor& g : grads_) g = g * inv;
    // Every stage must take the same decision: the flag (1: this stage overflowed) is maxed over
    // the pipeline and the replicas.
    Tensor flag = scalar_tensor(amp::all_finite(grads_).item<bool>() ? 0.0 : 1.0, kFloat32);
    flag = flag.contiguous().clone();
    group_->all_reduce(flag, ReduceOp::Max);
    if (dp_group_ && dp_group_->size() > 1) dp_group_->all_reduce(flag, ReduceOp::Max);
    if (overflow_group_ && overflow_group_->size() > 1)
      overflow_group_->all_reduce(flag, ReduceOp::Max);
    last_overflow_ = flag.item<double>() > 0;
    use = !last_overflow_ || !scale_manager_->get_drop_overflow_update();
  }
  if (accum_steps_ == 1) {
    if (use) opt_->step(grads_);
  } else {  // TrainOneStepCell's mean accumulation: sum g / k, update on the k-th (clean) step
    NoGradGuard no_grad;
    const double inv = 1.0 / double(accum_steps_);
    if (use) {
      for (size_t j = 0; j < params_.size(); ++j) accum_[j] = accum_[j] + grads_[j] * inv;
      has_clean_ = true;
    }
    if (accum_done_ + 1 >= accum_steps_ && has_clean_) {
      opt_->step(accum_);
      for (Tensor& a : accum_) a = zeros_like(a);
      has_clean_ = false;
      accum_done_ = 0;
    } else {
      ++accum_done_;
    }
  }
  if (scale_manager_) scale_manager_->update_loss_scale(last_overflow_);
  stats_.compute_seconds += std::chrono::duration<double>(Clock::now() - t1).count();
}

Tensor PipelineTrainer::input_grad() const {
  if (rank_ != 0 || input_grads_.empty() || !input_grads_[0].defined()) return {};
  return concat(input_grads_, 0);
}

Tensor PipelineTrainer::predict(const Tensor& x) {
  NoGradGuard no_grad;
  // Its own tags, above every step's (a step's micro-batch tags restart each step; predict's
  // count on, wrapping well below MPI's guaranteed tag bound of 32767).
  const int tag = int(16000 + (predicts_++ % 4000) * 2);
  Tensor in = rank_ == 0 ? x : recv_activation(tag, tag + 1);
  if (rank_ == 0)
    SPORE_CHECK(x.defined(),
                "[pipeline] predict: stage 0 needs the input, got an undefined tensor");
  Tensor y = (*stage_)(in);
  if (rank_ < size_ - 1) {
    send_activation(y, tag, tag + 1);
    for (const auto& p : pending_) p.first->wait();
    pending_.clear();
  }
  // The last stage's output to every rank of the group: its shape, then its values.
  Tensor header = zeros({2 + kMaxDims}, kInt64);
  if (rank_ == size_ - 1) {
    y = y.contiguous();
    SPORE_CHECK(y.dim() <= kMaxDims, "[pipeline] the output has ", y.dim(), " dims, at most ",
                kMaxDims);
    int64_t* h = header.data<int64_t>();
    h[0] = y.dim();
    h[1] = int64_t(y.dtype());
    for (int64_t d = 0; d < y.dim(); ++d) h[2 + d] = y.shape()[size_t(d)];
  }
  group_->broadcast(header, size_ - 1);
  if (rank_ != size_ - 1) {
    const int64_t* h = header.data<int64_t>();
    y = Tensor::empty(Shape(h + 2, h + 2 + h[0]), DType(h[1]));
  }
  group_->broadcast(y, size_ - 1);
  return y;
}

}  // namespace spore::parallel
