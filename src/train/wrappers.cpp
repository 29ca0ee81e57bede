// WithLossCell, TrainOneStepCell, WithEvalCell and LossFn (train/wrappers.h).
#include "spore/train/wrappers.h"

#include "backends/backend.h"
#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/jit.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"

namespace spore::train {
namespace {
nn::CellPtr checked(nn::CellPtr c, const char* who, const char* what) {
  SPORE_CHECK(c != nullptr, "[", who, "] ", what, " is null");
  return c;
}
}  // namespace

// ---- WithLossCell -------------------------------------------------------------------------------

WithLossCell::WithLossCell(nn::CellPtr backbone, nn::CellPtr loss_fn)
    : backbone_(checked(std::move(backbone), "WithLossCell", "backbone")),
      loss_fn_(checked(std::move(loss_fn), "WithLossCell", "loss_fn")) {
  set_cls_name("WithLossCell");
  register_cell("_backbone", backbone_);
  register_cell("_loss_fn", loss_fn_);
}

Tensor WithLossCell::construct(const Tensor& data, const Tensor& label) {
  return (*loss_fn_)((*backbone_)(data), label);  // through operator(): each cell's amp policy
}

std::vector<Tensor> WithLossCell::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() >= 2, "[WithLossCell] expected (data..., label), got ", inputs.size(),
              " input(s)");
  std::vector<Tensor> data(inputs.begin(), inputs.end() - 1);
  Tensor out = backbone_->forward(data).at(0);
  return {(*loss_fn_)(out, inputs.back())};
}

// ---- TrainOneStepCell ---------------------------------------------------------------------------

TrainOneStepCell::TrainOneStepCell(nn::CellPtr network, optim::OptimizerPtr optimizer, double sens)
    : network_(checked(std::move(network), "TrainOneStepCell", "network")),
      optimizer_(std::move(optimizer)),
      sens_(sens) {
  SPORE_CHECK(optimizer_ != nullptr, "[TrainOneStepCell] optimizer is null");
  set_cls_name("TrainOneStepCell");
  register_cell("network", network_);
}

Tensor TrainOneStepCell::construct(const Tensor& data, const Tensor& label) {
  return forward({data, label}).at(0);
}

void TrainOneStepCell::set_grad_accumulation(int64_t k, GradAccumulation mode) {
  SPORE_CHECK(k >= 1, "[TrainOneStepCell] gradient accumulation steps must be >= 1, got ", k,
              "; use 1 to update on every call");
  const bool same_mean =
      mode == GradAccumulation::kMean && accum_mode_ == mode && k == accum_steps_;
  const bool sum = mode == GradAccumulation::kSum && accum_mode_ == mode;
  SPORE_CHECK(micro_ == 0 || same_mean || sum,
              "[TrainOneStepCell] cannot change gradient accumulation to ", k,
              mode == GradAccumulation::kSum ? " (sum)" : " (mean)",
              " in the middle of an accumulation (", micro_, " of ", accum_steps_,
              " micro-batches done): a mean's 1/k is already in the buffers; change it after an "
              "update, or use GradAccumulation::kSum, whose count may change at any step");
  accum_steps_ = k;
  accum_mode_ = mode;
  if (mode == GradAccumulation::kSum || k > 1) {
    if (accum_.empty())
      for (const Tensor& p : optimizer_->parameters()) accum_.push_back(zeros_like(p));
  } else {
    accum_.clear();
  }
}

double TrainOneStepCell::accumulation_scale() const {
  return accum_mode_ == GradAccumulation::kSum ? 1.0 : 1.0 / double(accum_steps_);
}

std::vector<Tensor> TrainOneStepCell::forward(const std::vector<Tensor>& inputs) {
  const bool apply = micro_ + 1 >= accum_steps_;  // this call updates the parameters
  // Graph mode: the whole step (forward, loss, backward, optimizer update) is traced once per
  // signature by jit() and then runs compiled; the traced body is step_eager. With accumulation a
  // second graph (forward, backward, add into the buffers) serves the other micro-batches.
  // A grad reducer / grad-ready hook (data parallel) or an optimizer that communicates (sharded)
  // is host code, so those steps stay eager.
  if (get_context_mode() == Mode::Graph && !is_tracing() && !reducer_ && !grad_ready_ &&
      optimizer_->traceable()) {
    std::shared_ptr<void>& slot = apply ? compiled_ : compiled_acc_;
    if (!slot) {
      JitOptions opts;
      opts.name = apply ? "train_step" : "train_step_accumulate";
      // The optimizer's per-step scalars (learning rates, Adam's step) are read by the graph from
      // its hyper tensors (write_hyper() below), so they are not part of the key: one graph per
      // signature serves a whole schedule. An optimizer without hyper inputs (SGD without
      // momentum or with dampening, a custom one) traces them in: key on them as before.
      opts.extra_key = [this, apply] {
        std::string k = network_->trace_key();  // train flags, amp policies
        if (apply && !optimizer_->takes_hyper()) {
          for (size_t i = 0; i < optimizer_->parameters().size(); ++i)
            k += "," + std::to_string(optimizer_->lr_of(i));
          const std::string n = optimizer_->name();
          if (n != "Momentum" && n != "SGD")
            k += ",step=" + std::to_string(optimizer_->global_step());
          if (const auto m = optimizer_->momentum()) k += ",momentum=" + std::to_string(*m);
        }
        // A mean's 1/k is in the graph; a sum's count is host state (which graph runs).
        return k + ",sens=" + std::to_string(sens_) + ",accum=" +
               (accum_mode_ == GradAccumulation::kSum ? std::string("sum")
                                                      : std::to_string(accum_steps_));
      };
      slot = std::make_shared<JitFunction>(
          [this, apply](const std::vector<Tensor>& in) {
            tracing_own_step_ = true;
            struct Reset {
              bool& b;
              ~Reset() { b = false; }
            } reset{tracing_own_step_};
            return step_eager(in, apply);
          },
          opts);
    }
    const int64_t step = optimizer_->global_step();
    if (apply)
      optimizer_->write_hyper();  // this step's lr (and step count) into the graph's tensors
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(t.contiguous());
    std::vector<Tensor> out = (*std::static_pointer_cast<JitFunction>(slot))(in);
    if (apply)
      optimizer_->set_global_step(step + 1);  // tracing advanced it once; a cached run did not
    micro_ = apply ? 0 : micro_ + 1;
    last_grads_.clear();  // the gradients live inside the compiled step
    last_aux_.assign(out.begin() + 1, out.end());
    return out;
  }
  SPORE_CHECK(accum_steps_ == 1 || !is_tracing() || tracing_own_step_,
              "[TrainOneStepCell] gradient accumulation (", accum_steps_,
              " steps) cannot run inside "
              "another traced function (its micro-batch counter lives on the host); call the cell "
              "directly, which compiles its own graphs in GRAPH_MODE");
  std::vector<Tensor> out = step_eager(inputs, apply);
  micro_ = apply ? 0 : micro_ + 1;
  last_aux_.assign(out.begin() + 1, out.end());
  return out;
}

namespace {
// {loss, aux...} without history: what a step returns.
std::vector<Tensor> detached(const std::vector<Tensor>& outs) {
  std::vector<Tensor> r;
  for (const Tensor& t : outs) r.push_back(t.defined() ? t.detach() : t);
  return r;
}
}  // namespace

std::vector<Tensor> TrainOneStepCell::step_eager(const std::vector<Tensor>& inputs, bool apply) {
  EnableGradGuard enable;
  const std::vector<Tensor> outs = network_->forward(inputs);
  SPORE_CHECK(!outs.empty(),
              "[TrainOneStepCell] the network returned no outputs; it must return the loss "
              "first (then any auxiliary values)");
  const Tensor& loss = outs[0];
  SPORE_CHECK(is_floating(loss.dtype()),
              "[TrainOneStepCell] the network must return a floating "
              "loss, got ",
              dtype_name(loss.dtype()));
  SPORE_CHECK(loss.requires_grad(),
              "[TrainOneStepCell] the loss does not depend on any parameter "
              "that requires grad; check that the network's parameters are trainable");
  const bool accumulate = !accum_.empty();
  // With accumulation the reducer runs once per update on the sums, so nothing starts early.
  std::vector<Tensor> grads = autograd::grad(loss, optimizer_->parameters(),
                                             {.sens = full_like(loss.detach(), sens_),
                                              .on_grad_ready = accumulate ? nullptr : grad_ready_});
  if (accumulate) {
    const double inv = accumulation_scale();
    for (size_t i = 0; i < grads.size(); ++i) {
      if (!grads[i].defined()) continue;
      Tensor sum = accum_[i] + (inv == 1.0 ? grads[i] : grads[i] * inv);
      if (!apply) {
        assign(accum_[i], sum);
      } else {
        grads[i] = sum;
      }
    }
    if (!apply) {
      last_grads_.clear();
      return detached(outs);
    }
  }
  if (reducer_) grads = reducer_(std::move(grads));
  optimizer_->step(grads);
  if (accumulate)
    for (const Tensor& a : accum_) assign(a, zeros_like(a));
  last_grads_ = std::move(grads);
  return detached(outs);
}

// ---- TrainOneStepWithLossScaleCell --------------------------------------------------------------

// What the host knows of the steps' outcomes: the booked ones, and up to kQueued steps the device
// decided and the host has not booked yet (oldest first). Shared with the optimizer's and the
// manager's pending-step hooks.
struct TrainOneStepWithLossScaleCell::Book : std::enable_shared_from_this<Book> {
  static constexpr size_t kQueued = 4;  // how far the host may run ahead of the outcomes
  Book(amp::LossScaleManagerPtr m, const optim::OptimizerPtr& o)
      : manager(std::move(m)), optimizer(o) {}
  ~Book() {
    for (Slot& q : ring) {
      try {
        if (q.done) q.done->synchronize();  // no copy still writes the page-locked byte
        if (q.host) pinned->deallocate(q.host, 1);
      } catch (const std::exception&) {
        // At exit the device may be gone already (its runtime unloading): nothing to wait for.
      }
    }
  }
  // A booked step: the manager's rule on the host and the counters.
  void record(bool overflow) {
    manager->update_loss_scale(overflow);
    last_overflow = overflow;
    overflow_steps += overflow;
  }
  // Books every queued step (waiting for each), or those that have run (waiting for none).
  void settle() { book(false); }
  void settle_ready() { book(true); }
  // Queues the read of a step's overflow flag (bool scalar on `device`) behind that step; with
  // kQueued steps already unbooked, the oldest is booked first (the host waits for it).
  void expect(const Tensor& overflow, Device device) {
    if (queued == kQueued) book(false, 1);
    unhook();
    Slot& q = ring[(first + queued++) % kQueued];
    if (device.type == DeviceType::CPU) {
      q.flag = overflow;
    } else {
      Backend& b = get_backend(device.type);
      if (!q.done) {
        q.done = b.new_event(device.index);
        pinned = &b.pinned_allocator();
        q.host = pinned->allocate(1);
      }
      Stream& st = current_stream(device);
      b.copy_async(q.host, Device{}, overflow.data_ptr(), device, 1, st);
      q.done->record(st);
    }
    hook();
  }
  int64_t good_steps() const {
    const auto* dyn = dynamic_cast<const amp::DynamicLossScaleManager*>(manager.get());
    return dyn ? dyn->good_steps() : 0;
  }

  amp::LossScaleManagerPtr manager;
  std::weak_ptr<optim::Optimizer> optimizer;  // whose step count the booking advances
  bool last_overflow = false;
  int64_t overflow_steps = 0;
  // The step deciding on the device: the manager's scale and clean-step count there (float64
  // scalars), and what they hold once every queued step is booked (an upload when they differ
  // from the manager: the first step, a restore()).
  Tensor scale, good;
  double device_scale = -1;
  int64_t device_good = -1;
  bool eager = true;  // set_eager_booking
  size_t first = 0, queued = 0;

 private:
  // A step not booked yet: its flag (CPU), or the page-locked byte its flag is copied to and the
  // event recorded after that copy (a device).
  struct Slot {
    Tensor flag;
    std::unique_ptr<Event> done;
    void* host = nullptr;
  };
  bool ready(const Slot& q) const { return !q.done || q.done->query(); }
  void book(bool only_ready, size_t most = kQueued) {
    unhook();  // booking reads the step count and the manager: no re-entry through their hooks
    const optim::OptimizerPtr opt = optimizer.lock();
    if (!opt) return;  // gone: no step count left to advance
    const size_t before = queued;
    for (; queued > 0 && most > 0; --most) {
      Slot& q = ring[first];
      if (only_ready && !ready(q)) break;
      bool overflow;
      if (q.done) {
        q.done->synchronize();
        overflow = *static_cast<const bool*>(q.host);
      } else {
        overflow = q.flag.item<bool>();  // the CPU: the step has run
        q.flag = Tensor();
      }
      first = (first + 1) % kQueued;
      --queued;
      if (!overflow || !manager->get_drop_overflow_update())
        opt->set_global_step(opt->global_step() + 1);
      record(overflow);
    }
    if (queued != before) {  // the same rule ran on the device
      device_scale = manager->get_loss_scale();
      device_good = good_steps();
    }
    hook();
  }
  // Whatever reads the optimizer's step count or the manager's scale next books the queued steps
  // first. The optimizer's hook keeps the book alive (the book holds the optimizer weakly); the
  // manager's holds it weakly (the book holds the manager).
  void hook() {
    if (queued == 0) return;
    if (const optim::OptimizerPtr opt = optimizer.lock())
      opt->set_pending_step([b = shared_from_this()] { b->settle(); });
    manager->set_pending_step([w = weak_from_this()] {
      if (const auto b = w.lock()) b->settle();
    });
  }
  void unhook() {
    if (const optim::OptimizerPtr opt = optimizer.lock()) opt->set_pending_step(nullptr);
    manager->set_pending_step(nullptr);
  }
  Slot ring[kQueued];
  Allocator* pinned = nullptr;
};

TrainOneStepWithLossScaleCell::TrainOneStepWithLossScaleCell(nn::CellPtr network,
                                                             optim::OptimizerPtr optimizer,
                                                             amp::LossScaleManagerPtr manager)
    : TrainOneStepCell(std::move(network), std::move(optimizer)), manager_(std::move(manager)) {
  SPORE_CHECK(manager_ != nullptr, "[TrainOneStepWithLossScaleCell] loss_scale_manager is null");
  book_ = std::make_shared<Book>(manager_, this->optimizer());  // (the parameter was moved)
  set_cls_name("TrainOneStepWithLossScaleCell");
}

double TrainOneStepWithLossScaleCell::loss_scale() const {
  book_->settle();
  return manager_->get_loss_scale();
}
bool TrainOneStepWithLossScaleCell::last_overflow() const {
  book_->settle();
  return book_->last_overflow;
}
int64_t TrainOneStepWithLossScaleCell::overflow_steps() const {
  book_->settle();
  return book_->overflow_steps;
}

TrainOneStepWithLossScaleCell::TrainOneStepWithLossScaleCell(nn::CellPtr network,
                                                             optim::OptimizerPtr optimizer,
                                                             double scale_sense)
    : TrainOneStepWithLossScaleCell(
          std::move(network), std::move(optimizer),
          std::make_shared<amp::FixedLossScaleManager>(scale_sense, true)) {}

Tensor TrainOneStepWithLossScaleCell::construct(const Tensor& data, const Tensor& label) {
  return forward({data, label}).at(0);
}

std::vector<Tensor> TrainOneStepWithLossScaleCell::scaled_grads(const std::vector<Tensor>& inputs,
                                                                const Tensor& scale) {
  EnableGradGuard enable;
  const std::vector<Tensor> outs = network()->forward(inputs);
  SPORE_CHECK(!outs.empty(),
              "[TrainOneStepWithLossScaleCell] the network returned no outputs; it must return "
              "the loss first (then any auxiliary values)");
  const Tensor& loss = outs[0];
  SPORE_CHECK(is_floating(loss.dtype()),
              "[TrainOneStepWithLossScaleCell] the network must return a floating loss, got ",
              dtype_name(loss.dtype()));
  SPORE_CHECK(loss.requires_grad(),
              "[TrainOneStepWithLossScaleCell] the loss does not depend on any parameter "
              "that requires grad; check that the network's parameters are trainable");
  // The scale is a tensor (a graph input in Graph mode), so every scale runs the same graph.
  const Tensor sens = scale.to(loss.dtype()).expand(loss.shape());
  std::vector<Tensor> grads = autograd::grad(loss, optimizer()->parameters(),
                                             {.sens = sens, .on_grad_ready = grad_ready_hook()});
  if (grad_reducer()) grads = grad_reducer()(std::move(grads));  // overflow seen by every rank
  const Tensor inv = reciprocal(scale);  // float32: exact for the usual powers of two
  for (Tensor& g : grads)
    if (g.defined()) g = g * inv;
  std::vector<Tensor> out{loss.detach(), amp::all_finite(grads)};
  out.insert(out.end(), grads.begin(), grads.end());
  for (size_t i = 1; i < outs.size(); ++i) out.push_back(outs[i].detach());
  return out;
}

bool TrainOneStepWithLossScaleCell::decides_on_device() const {
  const auto* m = manager_.get();
  return device_decides_ && get_context_mode() == Mode::Graph && !is_tracing() && !grad_reducer() &&
         !grad_ready_hook() && accum_.empty() && !parallel::semi_auto_active() &&
         optimizer()->traceable() && optimizer()->gates_updates() &&
         (dynamic_cast<const amp::DynamicLossScaleManager*>(m) ||
          dynamic_cast<const amp::FixedLossScaleManager*>(m));
}

std::vector<Tensor> TrainOneStepWithLossScaleCell::device_step(const std::vector<Tensor>& inputs) {
  optim::Optimizer& opt = *optimizer();
  Book& b = *book_;
  const Tensor scale = b.scale.to(kFloat32);  // what the host-decided step feeds: float32(scale)
  const std::vector<Tensor> r = scaled_grads(inputs, scale);
  const size_t n = opt.parameters().size();
  const Tensor& finite = r[1];
  const std::vector<Tensor> grads(r.begin() + 2, r.begin() + 2 + long(n));
  NoGradGuard no_grad;
  if (manager_->get_drop_overflow_update()) opt.set_update_gate(finite);
  struct Ungate {
    optim::Optimizer& o;
    ~Ungate() { o.set_update_gate({}); }
  } ungate{opt};
  opt.step(grads);
  if (const auto* dyn = dynamic_cast<const amp::DynamicLossScaleManager*>(manager_.get())) {
    // DynamicLossScaleManager::update_loss_scale, in float64 as on the host.
    const double factor = dyn->scale_factor();
    const Tensor g1 = b.good + 1.0;
    const Tensor grow = greater_equal(g1, full_like(g1, double(dyn->scale_window())));
    const Tensor up =
        where(grow, minimum(b.scale * factor, full_like(b.scale, dyn->kMaxScale)), b.scale);
    const Tensor down = maximum(b.scale / factor, full_like(b.scale, 1.0));
    const Tensor zero = zeros_like(b.good);
    assign(b.scale, where(finite, up, down));
    assign(b.good, where(finite, where(grow, zero, g1), zero));
  }
  std::vector<Tensor> out{r[0], logical_not(finite), scale};
  out.insert(out.end(), r.begin() + 2 + long(n), r.end());
  return out;
}

std::vector<Tensor> TrainOneStepWithLossScaleCell::forward_on_device(
    const std::vector<Tensor>& inputs) {
  optim::Optimizer& opt = *optimizer();
  Book& b = *book_;
  const Device device = opt.parameters()[0].device();
  // The steps that have run are booked now; the others only when this step's hyper values (its
  // learning rate, Adam's step count) depend on how many of them applied.
  if (b.eager) b.settle_ready();
  if (b.queued > 0 && !opt.hyper_constant_for(int64_t(b.queued))) b.settle();
  if (!b.scale.defined()) {
    b.scale = Tensor::empty({}, kFloat64, device);
    b.good = Tensor::empty({}, kFloat64, device);
  }
  // The manager's state where the step reads it: uploaded (in stream order) only when the host
  // changed it (the first step, a restore()); otherwise the device already holds it. (With steps
  // queued the device is ahead of the manager: reading it would book them.)
  if (b.queued == 0) {
    const double s = manager_->get_loss_scale();
    const int64_t good = b.good_steps();
    if (s != b.device_scale || good != b.device_good) {
      const double g = double(good);
      b.scale.copy_from_host(&s);
      b.good.copy_from_host(&g);
      b.device_scale = s;
      b.device_good = good;
    }
  }
  if (!compiled_dev_) {
    JitOptions opts;
    opts.name = "train_step_loss_scale_device";
    opts.extra_key = [this] {
      std::string k =
          network()->trace_key() + ",drop=" + std::to_string(manager_->get_drop_overflow_update());
      if (const auto* dyn = dynamic_cast<const amp::DynamicLossScaleManager*>(manager_.get()))
        k += ",factor=" + std::to_string(dyn->scale_factor()) +
             ",window=" + std::to_string(dyn->scale_window());
      return k;
    };
    compiled_dev_ = std::make_shared<JitFunction>(
        [this](const std::vector<Tensor>& in) { return device_step(in); }, opts);
  }
  // Below, the step count is the booked one (the queued steps' outcomes leave the hyper values
  // as they are): read and restored without booking them.
  opt.set_pending_step(nullptr);
  const int64_t step = opt.global_step();
  opt.write_hyper();
  std::vector<Tensor> in;
  for (const Tensor& t : inputs) in.push_back(t.contiguous());
  std::vector<Tensor> out = (*std::static_pointer_cast<JitFunction>(compiled_dev_))(in);
  opt.set_global_step(step);  // tracing advanced it; booking the outcome does
  b.expect(out[1], device);
  grads_.clear();
  last_aux_.assign(out.begin() + 3, out.end());
  return out;
}

void TrainOneStepWithLossScaleCell::set_eager_booking(bool eager) { book_->eager = eager; }
int64_t TrainOneStepWithLossScaleCell::unbooked_steps() const { return int64_t(book_->queued); }

std::vector<Tensor> TrainOneStepWithLossScaleCell::forward(const std::vector<Tensor>& inputs) {
  if (decides_on_device()) return forward_on_device(inputs);
  book_->settle();  // the steps the device decided before, if any
  const double s = manager_->get_loss_scale();
  const Tensor host_scale = scalar_tensor(s, kFloat32, Device{});
  // The scale is an input of the step: on a device it lives there, uploaded only when it changes,
  // so a step copies nothing from pageable host memory (and a captured step can replay).
  Tensor scale = host_scale;
  const Device device = optimizer()->parameters()[0].device();
  if (device.type != DeviceType::CPU) {
    if (!device_scale_.defined()) device_scale_ = Tensor::empty({}, kFloat32, device);
    if (device_scale_value_ != s) {
      const float f = float(s);
      device_scale_.copy_from_host(&f);  // in stream order: a step still queued reads the old one
      device_scale_value_ = s;
    }
    scale = device_scale_;
  }
  std::vector<Tensor> r;
  if (get_context_mode() == Mode::Graph && !is_tracing() && !grad_reducer() && !grad_ready_hook()) {
    if (!compiled_ls_) {
      JitOptions opts;
      opts.name = "train_step_loss_scale";
      opts.extra_key = [this] {
        std::string k = network()->trace_key();  // train flags, amp policies
        return k;
      };
      compiled_ls_ = std::make_shared<JitFunction>(
          [this](const std::vector<Tensor>& in) {
            return scaled_grads(std::vector<Tensor>(in.begin(), in.end() - 1), in.back());
          },
          opts);
    }
    std::vector<Tensor> in;
    for (const Tensor& t : inputs) in.push_back(t.contiguous());
    in.push_back(scale);
    r = (*std::static_pointer_cast<JitFunction>(compiled_ls_))(in);
  } else {
    r = scaled_grads(inputs, scale);
  }
  // Reading the flag on the host is the one synchronisation point (after the graph ran).
  bool overflow = !r[1].item<bool>();
  // Operator sharding (semi_auto_parallel): each rank checked its own pieces' gradients, so the
  // ranks agree by one all-reduce (max) of the flag, and all skip or all update.
  if (parallel::semi_auto_active()) {
    Tensor flag = scalar_tensor(overflow ? 1.0 : 0.0, kFloat32).contiguous().clone();
    parallel::world()->all_reduce(flag, parallel::ReduceOp::Max);
    overflow = flag.item<double>() > 0;
  }
  const size_t n = optimizer()->parameters().size();
  std::vector<Tensor> grads(r.begin() + 2, r.begin() + 2 + long(n));
  const bool use = !overflow || !manager_->get_drop_overflow_update();
  if (accum_.empty()) {
    if (use) optimizer()->step(grads);
  } else {
    // Accumulation on the host side of the compiled step: clean micro-batches into the buffers.
    NoGradGuard no_grad;
    const double inv = accumulation_scale();
    if (use) {
      for (size_t i = 0; i < n; ++i)
        if (grads[i].defined())
          assign(accum_[i], accum_[i] + (inv == 1.0 ? grads[i] : grads[i] * inv));
      has_clean_micro_ = true;
    }
    if (micro_ + 1 >= accum_steps_ && has_clean_micro_) {
      optimizer()->step(accum_);
      for (const Tensor& a : accum_) assign(a, zeros_like(a));
      has_clean_micro_ = false;
      micro_ = 0;
    } else {
      ++micro_;
    }
  }
  grads_ = std::move(grads);
  book_->record(overflow);
  last_aux_.assign(r.begin() + 2 + long(n), r.end());
  // The flag and the scale are host values (the host decided with them): no upload per step.
  std::vector<Tensor> out{r[0], scalar_tensor(overflow ? 1.0 : 0.0, kBool, Device{}), host_scale};
  out.insert(out.end(), last_aux_.begin(), last_aux_.end());
  return out;
}

JitStats TrainOneStepCell::jit_stats() const {
  return compiled_ ? std::static_pointer_cast<JitFunction>(compiled_)->stats() : JitStats{};
}

JitStats TrainOneStepWithLossScaleCell::jit_stats() const {
  const std::shared_ptr<void>& c = compiled_dev_ ? compiled_dev_ : compiled_ls_;
  return c ? std::static_pointer_cast<JitFunction>(c)->stats() : JitStats{};
}

// ---- WithEvalCell -------------------------------------------------------------------------------

WithEvalCell::WithEvalCell(nn::CellPtr network, nn::CellPtr loss_fn)
    : network_(checked(std::move(network), "WithEvalCell", "network")),
      loss_fn_(checked(std::move(loss_fn), "WithEvalCell", "loss_fn")) {
  set_cls_name("WithEvalCell");
  register_cell("_network", network_);
  register_cell("_loss_fn", loss_fn_);
}

Tensor WithEvalCell::construct(const Tensor& data, const Tensor& label) {
  return forward({data, label}).at(0);
}

std::vector<Tensor> WithEvalCell::forward(const std::vector<Tensor>& inputs) {
  SPORE_CHECK(inputs.size() >= 2, "[WithEvalCell] expected (data..., label), got ", inputs.size(),
              " input(s)");
  std::vector<Tensor> data(inputs.begin(), inputs.end() - 1);
  Tensor outputs = network_->forward(data).at(0);
  Tensor loss = (*loss_fn_)(outputs, inputs.back());
  return {loss, outputs, inputs.back()};
}

// ---- LossFn -------------------------------------------------------------------------------------

LossFn::LossFn(Fn fn) : fn_(std::move(fn)) {
  SPORE_CHECK(fn_ != nullptr, "[LossFn] the loss function is empty");
  set_cls_name("LossFn");
}

}  // namespace spore::train
