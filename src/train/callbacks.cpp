// The built-in callbacks of train/callbacks.h: LossMonitor, TimeMonitor, ModelCheckpoint,
// EarlyStopping, History and ProgressBar.
#include "spore/train/callbacks.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <vector>

#include "spore/autograd.h"
#include "spore/io/checkpoint.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"
#include "spore/parallel/sharding.h"
#include "spore/train/model.h"

namespace spore::train {
namespace fs = std::filesystem;

// ---- LossMonitor / TimeMonitor ------------------------------------------------------------------

LossMonitor::LossMonitor(int64_t per_print_times, std::ostream* out)
    : per_print_(per_print_times), out_(out) {
  SPORE_CHECK(per_print_times >= 0, "[LossMonitor] per_print_times must be >= 0, got ",
              per_print_times);
}

void LossMonitor::on_step_end(RunContext& ctx) {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, std::isfinite(ctx.loss), "epoch: ", ctx.epoch,
                   " step: ", ctx.step, ". Invalid loss ", ctx.loss, ", terminating training.");
  if (per_print_ == 0 || ctx.step % per_print_ != 0) return;
  std::ostream& os = out_ ? *out_ : std::cout;
  os << "epoch: " << ctx.epoch << " step: " << ctx.step << ", loss is " << ctx.loss << std::endl;
}

TimeMonitor::TimeMonitor(std::ostream* out) : out_(out) {}

void TimeMonitor::on_epoch_end(RunContext& ctx) {
  std::ostream& os = out_ ? *out_ : std::cout;
  double ms = ctx.epoch_elapsed * 1000;
  double per_step = ctx.step > 0 ? ms / double(ctx.step) : 0;
  os << std::fixed << std::setprecision(3) << "epoch time: " << ms
     << " ms, per step time: " << per_step << " ms" << std::defaultfloat << std::endl;
}

// ---- ModelCheckpoint ---------------------------------------------------------------------------

ModelCheckpoint::ModelCheckpoint(std::string prefix, std::string directory, CheckpointConfig config)
    : prefix_(std::move(prefix)), directory_(std::move(directory)), config_(config) {
  SPORE_CHECK(!prefix_.empty() && prefix_.find('/') == std::string::npos,
              "[ModelCheckpoint] prefix must be a non-empty file name prefix without '/', got '",
              prefix_, "'");
  SPORE_CHECK(config.save_checkpoint_steps >= 0 && config.save_checkpoint_epochs >= 0,
              "[CheckpointConfig] save_checkpoint_steps and save_checkpoint_epochs must be >= 0, "
              "got ",
              config.save_checkpoint_steps, " and ", config.save_checkpoint_epochs);
  SPORE_CHECK(config.keep_checkpoint_max >= 1,
              "[CheckpointConfig] keep_checkpoint_max must be "
              ">= 1, got ",
              config.keep_checkpoint_max);
  used_prefix_ = prefix_;
}

namespace {
bool prefix_in_use(const fs::path& dir, const std::string& prefix) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return false;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string n = e.path().filename().string();
    if (n.rfind(prefix + "-", 0) == 0 && e.path().extension() == ".safetensors") return true;
  }
  return false;
}

// A save killed mid-write (kill -9, power loss) leaves "<file>.safetensors.tmp.<pid>" or
// "latest.tmp.<pid>" behind; the final names are never partial (both are written, then renamed).
// Removes such leftovers of processes that no longer run; a live writer's temp file is left alone.
void remove_stale_temp_files(const fs::path& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    std::string pid;
    if (const size_t at = n.rfind(".safetensors.tmp."); at != std::string::npos)
      pid = n.substr(at + 17);
    else if (n.rfind("latest.tmp.", 0) == 0)
      pid = n.substr(11);
    else
      continue;
    if (pid.empty() || pid.find_first_not_of("0123456789") != std::string::npos || pid.size() > 9)
      continue;
    if (::kill(pid_t(std::stol(pid)), 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    fs::remove(e.path(), rm);
  }
}
// Earlier runs' checkpoints of one prefix ("<prefix>-..." and "<prefix>_<n>-..."), oldest first
// (by modification time, then name).
std::vector<std::string> family_files(const fs::path& dir, const std::string& prefix) {
  std::vector<std::pair<fs::file_time_type, std::string>> found;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (e.path().extension() != ".safetensors" || n.rfind(prefix, 0) != 0) continue;
    size_t at = prefix.size();
    if (at < n.size() && n[at] == '_') {  // "<prefix>_<n>-"
      const size_t digits = n.find_first_not_of("0123456789", at + 1);
      if (digits == at + 1 || digits == std::string::npos || digits - at > 10)
        continue;  // 1..9 digits
      at = digits;
    }
    if (at >= n.size() || n[at] != '-') continue;
    found.emplace_back(e.last_write_time(ec), e.path().string());
  }
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& f : found) out.push_back(std::move(f.second));
  return out;
}

// "<dir>/latest": the newest checkpoint's file name, replaced atomically (write, then rename).
void write_latest(const fs::path& dir, const std::string& file) {
  const fs::path tmp = dir / ("latest.tmp." + std::to_string(::getpid()));
  {
    std::ofstream f(tmp, std::ios::trunc);
    f << fs::path(file).filename().string() << "\n";
    if (!f.good()) return;  // the checkpoint itself is saved; the pointer is a convenience
  }
  std::error_code ec;
  fs::rename(tmp, dir / "latest", ec);
  if (ec) fs::remove(tmp, ec);
}
}  // namespace

void ModelCheckpoint::on_train_begin(RunContext& ctx) {
  fs::path dir = directory_.empty() ? fs::path(".") : fs::path(directory_);
  // Per-rank checkpoints (sharded layers, pipeline stages): this rank's files are in rank_<r>/, so
  // the family of earlier runs (and what a resumed run continues) is found there.
  if (parallel::semi_auto_active() || (ctx.model && ctx.model->pipeline()) ||
      dynamic_cast<const parallel::ShardedOptimizer*>(ctx.optimizer) != nullptr)
    dir /= "rank_" + std::to_string(parallel::get_rank());
  std::error_code ec;
  fs::create_directories(dir, ec);
  SPORE_CHECK_KIND(ErrorKind::IOError, fs::is_directory(dir),
                   "[ModelCheckpoint] cannot create "
                   "the checkpoint directory '",
                   dir.string(), "': ", ec.message());
  remove_stale_temp_files(dir);
  used_prefix_ = prefix_;
  for (int i = 1; prefix_in_use(dir, used_prefix_); ++i)
    used_prefix_ = prefix_ + "_" + std::to_string(i);
  kept_.clear();
  if (config_.one_family) {
    // Suffixes only grow ("<prefix>_<n>" after the highest earlier n), so a name is never reused
    // once retention removed its files, and the newest run has the highest suffix.
    int64_t highest = -1;
    for (const std::string& f : family_files(dir, prefix_)) {
      kept_.push_back(f);
      const std::string n = fs::path(f).filename().string();
      const size_t dash = n.find('-', prefix_.size());
      const std::string suffix = n.substr(prefix_.size(), dash - prefix_.size());  // "" or "_<n>"
      highest = std::max<int64_t>(highest, suffix.empty() ? 0 : std::stoll(suffix.substr(1)));
    }
    used_prefix_ = highest < 0 ? prefix_ : prefix_ + "_" + std::to_string(highest + 1);
  }
  last_saved_step_ = -1;
}

void ModelCheckpoint::on_step_end(RunContext& ctx) {
  if (config_.save_checkpoint_steps > 0 && ctx.global_step % config_.save_checkpoint_steps == 0)
    save(ctx);
}

void ModelCheckpoint::on_epoch_end(RunContext& ctx) {
  if (config_.save_checkpoint_epochs > 0 && ctx.epoch % config_.save_checkpoint_epochs == 0)
    save(ctx);
}

void ModelCheckpoint::on_train_end(RunContext& ctx) {
  if (config_.save_on_train_end && ctx.global_step > 0) save(ctx);
}

const std::string& ModelCheckpoint::latest_checkpoint() const {
  static const std::string none;
  return kept_.empty() ? none : kept_.back();
}

namespace {
// Per-rank files, for `spore convert --merge`: the network tensor each optimizer parameter name
// stands for ("param.<name>" = "<tensor>": a state "moments.<name>" is cut like that tensor), and
// with ZeRO-1 the ranges of the flattened parameters whose state this rank keeps, as a whole
// ("optimizer_shard", checked by --resume) and per parameter ("shard.<name>" = "begin:end").
void add_rank_metadata(const optim::Optimizer* opt, const io::NamedTensors& held,
                       io::Metadata& meta) {
  if (!opt) return;
  const auto* zero = dynamic_cast<const parallel::ShardedOptimizer*>(opt);
  const optim::Optimizer& named = zero ? zero->inner() : *opt;
  for (size_t i = 0; i < named.parameters().size(); ++i)
    for (const auto& [n, t] : held)
      if (t.is_same(named.parameters()[i])) meta["param." + named.parameter_names()[i]] = n;
  if (!zero) return;
  meta["optimizer_shard"] = zero->shard_range();
  for (const auto& [name, r] : zero->state_ranges())
    meta["shard." + name] = std::to_string(r.first) + ":" + std::to_string(r.second);
}
}  // namespace

void ModelCheckpoint::save(RunContext& ctx) {
  if (ctx.global_step == last_saved_step_) return;  // step and epoch triggers on the same step
  SPORE_CHECK(ctx.network != nullptr, "[ModelCheckpoint] the run context has no network to save");
  NoGradGuard no_grad;
  // pipeline_stages: this rank holds its stage only, and saves that (per-stage checkpoints).
  const parallel::PipelineTrainer* pipe = ctx.model ? ctx.model->pipeline().get() : nullptr;
  io::NamedTensors tensors =
      pipe ? ctx.model->held_parameters() : ctx.network->parameters_and_buffers();
  if (config_.save_optimizer_state && ctx.optimizer)
    for (auto& st : ctx.optimizer->state()) tensors.push_back(st);
  io::Metadata meta{{"epoch", std::to_string(ctx.epoch)},
                    {"step", std::to_string(ctx.step)},
                    {"global_step", std::to_string(ctx.global_step)}};
  if (ctx.optimizer) {
    std::ostringstream lr;
    lr << std::setprecision(17) << ctx.lr;
    meta["lr"] = lr.str();
    meta["optimizer"] = ctx.optimizer->name();
  }
  if (config_.append_info)
    for (auto& [k, v] : config_.append_info()) meta[k] = v;
  fs::path dir = directory_.empty() ? fs::path(".") : fs::path(directory_);
  // semi_auto_parallel: each rank holds pieces of the cut parameters (and of their optimizer
  // state), so each rank writes its own checkpoint under rank_<r>/ (MindSpore's per-rank
  // checkpoints), with every cut tensor's layout in the metadata. Add the callback on every rank.
  if (parallel::semi_auto_active()) {
    dir /= "rank_" + std::to_string(parallel::get_rank());
    meta["rank"] = std::to_string(parallel::get_rank());
    meta["group_size"] = std::to_string(parallel::get_group_size());
    for (const auto& [name, t] : ctx.network->parameters_and_buffers()) {
      const parallel::Layout l = parallel::layout_of(t);
      if (!l.is_whole()) meta["layout." + name] = l.str();
    }
    if (pipe) {  // pipeline stages whose layers are cut over the stage's ranks
      meta["pipeline_stage"] = std::to_string(pipe->stage_index());
      meta["pipeline_stages"] = std::to_string(pipe->num_stages());
    }
    // Which tensor each optimizer name stands for; ZeRO-1 over each piece's replicas: this rank's
    // range of each group's flattened pieces.
    add_rank_metadata(ctx.optimizer, tensors, meta);
    fs::create_directories(dir);
  }
  const auto* zero = dynamic_cast<const parallel::ShardedOptimizer*>(ctx.optimizer);
  if (!parallel::semi_auto_active() && (pipe || zero)) {
    // Each rank writes its stage under rank_<r>/ (every replica of a stage holds the same values),
    // or, with a sharded optimizer (ZeRO-1), the parameters and its part of the optimizer state;
    // `spore convert --merge` joins one replica's stages into one file, --split cuts it back.
    dir /= "rank_" + std::to_string(parallel::get_rank());
    meta["rank"] = std::to_string(parallel::get_rank());
    meta["group_size"] = std::to_string(parallel::get_group_size());
    if (pipe) {
      meta["pipeline_stage"] = std::to_string(pipe->stage_index());
      meta["pipeline_stages"] = std::to_string(pipe->num_stages());
    }
    // ZeRO-1: this rank's part of the optimizer state (the range of the flattened parameters).
    // The optimizer's names of this rank's tensors.
    add_rank_metadata(ctx.optimizer, tensors, meta);
    fs::create_directories(dir);
  }
  std::string file = (dir / (used_prefix_ + "-" + std::to_string(ctx.epoch) + "_" +
                             std::to_string(ctx.step) + ".safetensors"))
                         .string();
  io::save_checkpoint(tensors, file, meta);
  last_saved_step_ = ctx.global_step;
  // Re-saving the same name (train end right after a step save is skipped above) keeps one entry.
  if (kept_.empty() || kept_.back() != file) kept_.push_back(file);
  while (int64_t(kept_.size()) > config_.keep_checkpoint_max) {
    std::error_code ec;
    fs::remove(kept_.front(), ec);
    kept_.pop_front();
  }
  if (config_.one_family) write_latest(dir, file);
}

// ---- EarlyStopping ------------------------------------------------------------------------------

EarlyStopping::EarlyStopping(EarlyStoppingOptions opts) : opts_(std::move(opts)) {
  SPORE_CHECK(opts_.patience >= 0, "[EarlyStopping] patience must be >= 0, got ", opts_.patience);
  SPORE_CHECK(opts_.min_delta >= 0, "[EarlyStopping] min_delta must be >= 0, got ",
              opts_.min_delta);
  const std::string& m = opts_.mode;
  SPORE_CHECK(m == "auto" || m == "min" || m == "max",
              "[EarlyStopping] mode must be 'auto', "
              "'min' or 'max', got '",
              m, "'");
  if (m == "auto") {
    maximize_ = false;
    for (const char* k : {"acc", "precision", "recall", "f1", "top"})
      if (opts_.monitor.find(k) != std::string::npos) maximize_ = true;
  } else {
    maximize_ = m == "max";
  }
}

EarlyStopping::EarlyStopping(std::string monitor, int64_t patience, double min_delta,
                             std::string mode)
    : EarlyStopping(EarlyStoppingOptions{.monitor = std::move(monitor),
                                         .patience = patience,
                                         .min_delta = min_delta,
                                         .mode = std::move(mode),
                                         .baseline = std::nullopt,
                                         .restore_best_weights = false}) {}

void EarlyStopping::on_train_begin(RunContext&) {
  wait_ = stopped_epoch_ = best_epoch_ = 0;
  double inf = std::numeric_limits<double>::infinity();
  best_ = opts_.baseline ? *opts_.baseline : (maximize_ ? -inf : inf);
  best_weights_.clear();
}

bool EarlyStopping::improved(double v) const {
  return maximize_ ? v - opts_.min_delta > best_ : v + opts_.min_delta < best_;
}

void EarlyStopping::on_epoch_end(RunContext& ctx) {
  double value;
  if (opts_.monitor == "loss") {
    value = ctx.epoch_loss;
  } else {
    if (ctx.metrics.empty()) return;  // no validation this epoch
    auto it = ctx.metrics.find(opts_.monitor);
    if (it == ctx.metrics.end()) {
      std::string keys = "'loss'";
      for (const auto& [k, _] : ctx.metrics) keys += ", '" + k + "'";
      SPORE_THROW(ErrorKind::ValueError, "[EarlyStopping] monitor '", opts_.monitor,
                  "' is not among the available values: ", keys);
    }
    value = it->second;
  }
  if (improved(value)) {
    best_ = value;
    best_epoch_ = ctx.epoch;
    wait_ = 0;
    if (opts_.restore_best_weights && ctx.network) {
      NoGradGuard no_grad;
      best_weights_.clear();
      for (const auto& [n, p] : ctx.network->parameters_and_buffers())
        best_weights_.push_back(p.clone());
    }
    return;
  }
  if (++wait_ >= opts_.patience) {  // MindSpore: patience 0 stops at the first miss
    stopped_epoch_ = ctx.epoch;
    ctx.request_stop();
  }
}

void EarlyStopping::on_train_end(RunContext& ctx) {
  if (!opts_.restore_best_weights || best_weights_.empty() || !ctx.network) return;
  NoGradGuard no_grad;
  auto params = ctx.network->parameters_and_buffers();
  for (size_t i = 0; i < params.size() && i < best_weights_.size(); ++i)
    assign(params[i].second, best_weights_[i]);
}

// ---- History ------------------------------------------------------------------------------------

void History::on_train_begin(RunContext&) {
  epochs_.clear();
  history_.clear();
}

void History::on_epoch_end(RunContext& ctx) {
  epochs_.push_back(ctx.epoch);
  history_["loss"].push_back(ctx.epoch_loss);
  for (const auto& [k, v] : ctx.metrics) history_[k].push_back(v);
}

const std::vector<double>& History::operator[](const std::string& key) const {
  auto it = history_.find(key);
  if (it == history_.end()) {
    std::string keys;
    for (const auto& [k, _] : history_) keys += (keys.empty() ? "'" : ", '") + k + "'";
    SPORE_THROW(ErrorKind::IndexError, "[History] no values recorded for '", key,
                "'; recorded: ", keys.empty() ? "(none)" : keys);
  }
  return it->second;
}

// ---- ProgressBar --------------------------------------------------------------------------------

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) seconds = 0;
  auto s = int64_t(std::llround(seconds));
  char buf[32];
  if (s >= 3600)
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", (long long)(s / 3600),
                  (long long)(s / 60 % 60), (long long)(s % 60));
  else
    std::snprintf(buf, sizeof buf, "%02lld:%02lld", (long long)(s / 60), (long long)(s % 60));
  return buf;
}

ProgressBar::ProgressBar(ProgressBarOptions opts) : opts_(opts) {
  SPORE_CHECK(opts.log_every >= 0, "[ProgressBar] log_every must be >= 0, got ", opts.log_every);
  SPORE_CHECK(opts.width >= 1, "[ProgressBar] width must be >= 1, got ", opts.width);
}

std::ostream& ProgressBar::out() const { return opts_.stream ? *opts_.stream : std::cerr; }

void ProgressBar::on_train_begin(RunContext&) {
  tty_ = opts_.tty ? *opts_.tty : (opts_.stream == nullptr && isatty(fileno(stderr)));
}

void ProgressBar::on_epoch_begin(RunContext&) {
  last_draw_ = -1;
  last_len_ = 0;
}

void ProgressBar::on_step_end(RunContext& ctx) {
  if (tty_) {
    if (last_draw_ < 0 || ctx.epoch_elapsed - last_draw_ >= opts_.min_interval) draw(ctx, false);
  } else if (opts_.log_every > 0 && ctx.step % opts_.log_every == 0 &&
             ctx.step != ctx.steps_per_epoch) {
    draw(ctx, false);  // the epoch's last step is reported by on_epoch_end
  }
}

void ProgressBar::on_epoch_end(RunContext& ctx) { draw(ctx, true); }

void ProgressBar::draw(const RunContext& ctx, bool final) {
  double rate =
      ctx.epoch_elapsed > 0 ? double(ctx.epoch_samples * opts_.replicas) / ctx.epoch_elapsed : 0;
  double eta = 0;
  if (ctx.step > 0 && ctx.steps_per_epoch > ctx.step)
    eta = ctx.epoch_elapsed / double(ctx.step) * double(ctx.steps_per_epoch - ctx.step);
  std::string total = ctx.steps_per_epoch > 0 ? std::to_string(ctx.steps_per_epoch) : "?";
  std::ostringstream s;
  s << std::fixed;
  if (tty_) {
    s << "epoch " << ctx.epoch << "/" << ctx.epoch_num << "  " << ctx.step << "/" << total << " [";
    int filled = ctx.steps_per_epoch > 0
                     ? int(double(opts_.width) * double(ctx.step) / double(ctx.steps_per_epoch))
                     : 0;
    filled = std::min(filled, opts_.width);
    for (int i = 0; i < opts_.width; ++i) s << (i < filled ? '=' : (i == filled ? '>' : ' '));
    s << "] loss " << std::setprecision(4) << ctx.loss << "  " << std::setprecision(1) << rate
      << " img/s  ";
    if (final) {
      s << "time " << format_duration(ctx.epoch_elapsed);
      if (!std::isnan(ctx.epoch_loss))
        s << "  mean_loss " << std::setprecision(4) << ctx.epoch_loss;
      for (const auto& [k, v] : ctx.metrics) s << "  " << k << " " << std::setprecision(4) << v;
    } else {
      s << "ETA " << format_duration(eta);
    }
    std::string line = s.str();
    std::string pad = line.size() < last_len_ ? std::string(last_len_ - line.size(), ' ') : "";
    out() << '\r' << line << pad;
    if (final) out() << '\n';
    out().flush();
    last_len_ = line.size();
  } else {
    s << "epoch " << ctx.epoch << "/" << ctx.epoch_num << (final ? " done " : " step ") << ctx.step
      << "/" << total << " loss " << std::setprecision(4) << ctx.loss;
    if (final && !std::isnan(ctx.epoch_loss)) s << " mean_loss " << ctx.epoch_loss;
    s << " img/s " << std::setprecision(1) << rate;
    if (final)
      s << " time " << ctx.epoch_elapsed << "s";
    else
      s << " eta " << std::setprecision(0) << eta << "s";
    for (const auto& [k, v] : ctx.metrics) s << " " << k << " " << std::setprecision(4) << v;
    out() << s.str() << std::endl;
  }
  last_draw_ = ctx.epoch_elapsed;
}

}  // namespace spore::train
