// Data parallelism: the start-up check and broadcast of the parameters, and the bucketed gradient
// all-reduce (DistributedGradReducer) that TrainOneStepCell runs between backward and the
// optimizer. Buckets are filled from the backward pass (TrainOneStepCell's grad-ready hook) and
// started in one fixed order on every rank (non-blocking collectives must be issued in the same
// order everywhere), so a bucket's all-reduce overlaps the backward of the earlier layers.
#include <algorithm>
#include <cstring>
#include <map>
#include <sstream>

#include "spore/autograd.h"
#include "spore/ops.h"
#include "spore/parallel/parallel.h"
#include "spore/train/wrappers.h"

namespace spore::parallel {
namespace {

// "name|dtype|(shape)\n" per tensor: what every rank must agree on.
std::string signature(const std::vector<std::pair<std::string, Tensor>>& named) {
  std::string s;
  for (const auto& [name, t] : named)
    s += name + "|" + dtype_name(t.dtype()) + "|" + shape_str(t.shape()) + "\n";
  return s;
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

std::map<std::string, std::string> parse(const std::string& sig) {  // name -> "dtype (shape)"
  std::map<std::string, std::string> m;
  std::istringstream is(sig);
  std::string line;
  while (std::getline(is, line)) {
    const size_t a = line.find('|'), b = line.find('|', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    m[line.substr(0, a)] = line.substr(a + 1, b - a - 1) + " " + line.substr(b + 1);
  }
  return m;
}

// What differs between root's list and rank r's, at most `limit` items.
std::string diff(const std::string& root_sig, const std::string& sig, int root, int r) {
  const auto a = parse(root_sig), b = parse(sig);
  std::ostringstream os;
  int n = 0;
  const int limit = 8;
  for (const auto& [name, desc] : a) {
    auto it = b.find(name);
    if (it == b.end()) {
      if (n++ < limit)
        os << "\n    " << name << ": " << desc << " on rank " << root << ", missing on rank " << r;
    } else if (it->second != desc) {
      if (n++ < limit)
        os << "\n    " << name << ": " << desc << " on rank " << root << ", " << it->second
           << " on rank " << r;
    }
  }
  for (const auto& [name, desc] : b)
    if (!a.count(name) && n++ < limit)
      os << "\n    " << name << ": " << desc << " on rank " << r << ", missing on rank " << root;
  if (n == 0) os << "\n    the same parameters in a different order";
  if (n > limit) os << "\n    ... and " << n - limit << " more";
  return os.str();
}

}  // namespace

void broadcast_parameters(const std::vector<std::pair<std::string, Tensor>>& named, Group& group,
                          int root) {
  if (group.size() == 1) return;
  NoGradGuard no_grad;
  const std::string sig = signature(named);
  // Compare one hash first: the full lists travel only when something differs.
  Tensor h = from_vector(std::vector<int64_t>{int64_t(fnv1a(sig))}, {1});
  Tensor hashes = group.all_gather(h).flatten();
  const std::vector<int64_t> hv = hashes.to_vector<int64_t>();
  if (std::any_of(hv.begin(), hv.end(), [&](int64_t x) { return x != hv[size_t(root)]; })) {
    Tensor len = from_vector(std::vector<int64_t>{int64_t(sig.size())}, {1});
    const std::vector<int64_t> lens = group.all_gather(len).flatten().to_vector<int64_t>();
    const int64_t max_len = *std::max_element(lens.begin(), lens.end());
    std::vector<uint8_t> mine(size_t(max_len), 0);
    std::memcpy(mine.data(), sig.data(), sig.size());
    Tensor all = group.all_gather(from_vector(mine, {max_len})).flatten();
    const uint8_t* p = all.data<uint8_t>();
    auto sig_of = [&](int r) {
      return std::string(reinterpret_cast<const char*>(p + r * max_len), size_t(lens[size_t(r)]));
    };
    std::ostringstream os;
    os << "[parallel] data parallel needs the same network on every rank, but the parameters "
          "(names, shapes, dtypes) differ:";
    for (int r = 0; r < group.size(); ++r)
      if (hv[size_t(r)] != hv[size_t(root)])
        os << "\n  rank " << r << " vs rank " << root << ":"
           << diff(sig_of(root), sig_of(r), root, r);
    SPORE_THROW(ErrorKind::ValueError, os.str());
  }
  // One fused buffer per dtype: a handful of broadcasts instead of one per tensor.
  std::map<DType, std::vector<Tensor>> by_dtype;
  for (const auto& [name, t] : named) {
    SPORE_CHECK(t.is_contiguous(), "[parallel] broadcast_parameters: ", name, " is not contiguous");
    by_dtype[t.dtype()].push_back(t);
  }
  for (auto& [dt, ts] : by_dtype) {
    int64_t n = 0;
    for (const Tensor& t : ts) n += t.numel();
    // Packed and unpacked with ops, so the parameters may live on any device.
    NoGradGuard no_grad;
    std::vector<Tensor> flat;
    for (const Tensor& t : ts) flat.push_back(t.detach().reshape({t.numel()}));
    Tensor buf = concat(flat, 0);
    SPORE_ASSERT(buf.numel() == n, "[parallel] broadcast_parameters packing");
    group.broadcast(buf, root);
    int64_t off = 0;
    for (const Tensor& t : ts) {
      assign(t, buf.slice(0, off, off + t.numel()).view(t.shape()));
      off += t.numel();
    }
  }
}

// ---- DistributedGradReducer ---------------------------------------------------------------------

DistributedGradReducer::DistributedGradReducer(std::vector<std::pair<std::string, Tensor>> params,
                                               GroupPtr group, bool mean, CommFusion fusion)
    : params_(std::move(params)), group_(std::move(group)), mean_(mean) {
  SPORE_CHECK(group_ != nullptr,
              "[DistributedGradReducer] the group is null; call parallel::init() first");
  const size_t n = params_.size();
  bucket_of_.assign(n, 0);
  if (!fusion.fusion_indices.empty()) {
    // Index mode: buckets are the ranges between the split indices (forward order), started
    // from the last range, the one backward finishes first.
    std::vector<size_t> cuts{0};
    for (int64_t c : fusion.fusion_indices) {
      SPORE_CHECK_INDEX(c > 0 && size_t(c) < n && size_t(c) > cuts.back(),
                        "[DistributedGradReducer] comm_fusion index ", c,
                        " must increase within (0, ", n, ")");
      cuts.push_back(size_t(c));
    }
    cuts.push_back(n);
    for (size_t k = cuts.size() - 1; k > 0; --k) {
      buckets_.emplace_back();
      for (size_t i = cuts[k - 1]; i < cuts[k]; ++i) buckets_.back().push_back(i);
    }
  } else {
    const double cap = fusion.bucket_mb * 1048576.0;
    size_t bytes = 0;
    for (size_t k = n; k-- > 0;) {
      const Tensor& p = params_[k].second;
      const bool fits = !buckets_.empty() && cap > 0 && double(bytes + p.nbytes()) <= cap &&
                        params_[buckets_.back().front()].second.dtype() == p.dtype();
      if (!fits) {
        buckets_.emplace_back();
        bytes = 0;
      }
      buckets_.back().push_back(k);
      bytes += p.nbytes();
    }
  }
  // A bucket must hold one dtype; split index-mode ranges that mix them.
  std::vector<std::vector<size_t>> split;
  for (auto& b : buckets_) {
    split.emplace_back();
    for (size_t i : b) {
      if (!split.back().empty() &&
          params_[split.back().front()].second.dtype() != params_[i].second.dtype())
        split.emplace_back();
      split.back().push_back(i);
    }
  }
  buckets_ = std::move(split);
  for (size_t b = 0; b < buckets_.size(); ++b)
    for (size_t i : buckets_[b]) bucket_of_[i] = b;
  grads_.assign(n, Tensor());
  ready_count_.assign(buckets_.size(), 0);
  buffers_.assign(buckets_.size(), Tensor());
  works_.assign(buckets_.size(), nullptr);
}

void DistributedGradReducer::start(size_t b) {
  const auto& idx = buckets_[b];
  int64_t n = 0;
  for (size_t i : idx) n += params_[i].second.numel();
  // The bucket is packed with ops, on the parameters' device (n,) flat.
  std::vector<Tensor> flat;
  for (size_t i : idx) {
    const Tensor& p = params_[i].second;
    Tensor g = grads_[i].defined() ? grads_[i] : zeros_like(p);
    if (g.dtype() != p.dtype()) g = g.to(p.dtype());
    SPORE_CHECK(g.numel() == p.numel(), "[DistributedGradReducer] gradient of ", params_[i].first,
                " has ", g.numel(), " elements, the parameter ", p.numel());
    flat.push_back(g.reshape({g.numel()}));
  }
  Tensor buf = flat.size() == 1 ? flat[0].contiguous().clone() : concat(flat, 0);
  SPORE_ASSERT(buf.numel() == n, "[DistributedGradReducer] bucket packing");
  buffers_[b] = buf;
  works_[b] = group_->all_reduce_async(buf, mean_ ? ReduceOp::Mean : ReduceOp::Sum);
}

void DistributedGradReducer::on_grad_ready(size_t i, const Tensor& grad) {
  if (group_->size() == 1 || i >= grads_.size()) return;
  grads_[i] = grad.detach();
  const size_t b = bucket_of_[i];
  ++ready_count_[b];
  // Start, in bucket order, every bucket whose gradients are all in (the same order on all ranks).
  size_t next = 0;
  while (next < works_.size() && works_[next]) ++next;
  while (next < buckets_.size() && ready_count_[next] == buckets_[next].size()) start(next++);
  for (auto& w : works_)  // drive MPI's progress engine (it moves data only inside MPI calls)
    if (w) w->test();
}

std::vector<Tensor> DistributedGradReducer::operator()(std::vector<Tensor> grads) {
  if (group_->size() == 1) return grads;
  SPORE_CHECK(grads.size() == params_.size(), "[DistributedGradReducer] got ", grads.size(),
              " gradients for ", params_.size(), " parameters");
  for (size_t b = 0; b < buckets_.size(); ++b) {
    if (works_[b]) continue;
    for (size_t i : buckets_[b]) grads_[i] = grads[i];
    start(b);
  }
  for (size_t b = 0; b < buckets_.size(); ++b) {
    works_[b]->wait();
    int64_t off = 0;
    for (size_t i : buckets_[b]) {
      const Tensor& p = params_[i].second;
      grads[i] = buffers_[b].slice(0, off, off + p.numel()).view(p.shape());
      off += p.numel();
    }
  }
  std::fill(grads_.begin(), grads_.end(), Tensor());
  std::fill(ready_count_.begin(), ready_count_.end(), 0);
  std::fill(buffers_.begin(), buffers_.end(), Tensor());
  std::fill(works_.begin(), works_.end(), nullptr);
  return grads;
}

std::shared_ptr<DistributedGradReducer> setup_data_parallel(
    train::TrainOneStepCell& step, const std::vector<std::pair<std::string, Tensor>>& named,
    GroupPtr group) {
  if (!group) group = world();
  broadcast_parameters(named, *group);
  // Name the optimizer's parameters by identity with the network's.
  std::vector<std::pair<std::string, Tensor>> params;
  const auto& ps = step.optimizer()->parameters();
  for (size_t i = 0; i < ps.size(); ++i) {
    std::string name = "param" + std::to_string(i);
    for (const auto& [n, t] : named)
      if (t.is_same(ps[i]) ||
          (t.defined() && t.impl().storage == ps[i].impl().storage && t.offset() == ps[i].offset()))
        name = n;
    params.emplace_back(name, ps[i]);
  }
  const AutoParallelContext& ctx = get_auto_parallel_context();
  auto reducer = std::make_shared<DistributedGradReducer>(std::move(params), group,
                                                          ctx.gradients_mean, ctx.comm_fusion);
  step.set_grad_reducer([reducer](std::vector<Tensor> g) { return (*reducer)(std::move(g)); });
  if (ctx.overlap)
    step.set_grad_ready_hook(
        [reducer](size_t i, const Tensor& g) { reducer->on_grad_ready(i, g); });
  else
    step.set_grad_ready_hook(nullptr);
  return reducer;
}

}  // namespace spore::parallel
