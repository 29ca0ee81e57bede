// auto_parallel's strategy search (spore/parallel/auto_parallel.h): candidates per layer, priced
// by the bytes a dry trial step moves.
#include "spore/parallel/auto_parallel.h"

#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>

#include "spore/autograd.h"
#include "spore/error.h"
#include "spore/grad_mode.h"
#include "spore/parallel/parallel.h"

namespace spore::parallel {

namespace {

std::string strategy_str(const Strategy& s) {
  std::string out = "(";
  for (size_t i = 0; i < s.size(); ++i) {
    out += i ? ", (" : "(";
    for (size_t j = 0; j < s[i].size(); ++j) out += (j ? ", " : "") + std::to_string(s[i][j]);
    out += s[i].size() == 1 ? ",)" : ")";
  }
  return out + ")";
}

struct Candidate {
  std::string name;
  nn::Cell* cell;
  ShardableLayer* layer;
  std::vector<std::pair<std::string, Tensor>> whole;  // its parameters before any trial
  std::vector<Strategy> options;
  int chosen = -1;  // index into options; -1: none (weights whole, layouts as they come)
};

// The layer holds options[k] (k = -1: no strategy) with its parameters cut accordingly.
void set_choice(Candidate& c, int k) {
  c.layer->clear_strategy();
  for (auto& [n, w] : c.whole) unshard_parameter(c.cell->parameter(n), w);
  if (k >= 0) c.layer->apply_strategy(c.options[size_t(k)]);
  c.chosen = k;
}

// The mesh: dp from the first dataset_strategy entry, else from the first annotation's batch cut,
// else every rank; mp the rest.
std::pair<int64_t, int64_t> mesh(const std::vector<ShardableLayer*>& annotated, int64_t n) {
  const AutoParallelContext& ctx = get_auto_parallel_context();
  int64_t dp = n;
  if (!ctx.dataset_strategy.empty() && !ctx.dataset_strategy[0].empty())
    dp = ctx.dataset_strategy[0][0];
  else if (!annotated.empty() && !annotated[0]->strategy().empty() &&
           !annotated[0]->strategy()[0].empty())
    dp = annotated[0]->strategy()[0][0];
  SPORE_CHECK(dp >= 1 && n % dp == 0, "[auto_parallel] the batch is cut over ", dp,
              " ranks, which does not divide the ", n,
              " ranks; change dataset_strategy's first entry");
  return {dp, n / dp};
}

}  // namespace

std::vector<std::string> StrategyPlan::lines() const {
  std::vector<std::string> out;
  size_t w = 0;
  for (const Layer& l : layers) w = std::max(w, l.name.size());
  for (const Layer& l : layers)
    out.push_back(l.name + std::string(w - l.name.size() + 2, ' ') + strategy_str(l.strategy) +
                  (l.annotated ? "  user" : "  chosen"));
  return out;
}

int64_t bytes_per_step(nn::Cell& region, const std::vector<Tensor>& sample, bool backward) {
  const bool was_training = region.training();
  region.set_train(false);  // no running statistics updated, no dropout drawn
  struct Restore {
    nn::Cell& c;
    bool mode;
    ~Restore() { c.set_train(mode); }
  } restore{region, was_training};
  int64_t bytes = 0;
  {
    const DryRunScope dry;
    reset_comm_bytes();
    std::optional<NoGradGuard> no_grad;
    if (!backward) no_grad.emplace();
    const std::vector<Tensor> out = region.forward(sample);
    if (backward && !out.empty() && out[0].defined() && is_floating(out[0].dtype())) {
      std::vector<Tensor> params;
      for (const Tensor& p : region.trainable_params())
        if (is_floating(p.dtype())) params.push_back(p);
      const Tensor loss = out[0].dim() == 0 ? out[0] : out[0].sum();
      if (!params.empty()) autograd::grad(loss, params);
    }
    bytes = comm_bytes();
  }
  return bytes;
}

StrategyPlan search_strategies(nn::Cell& network, nn::Cell& region,
                               const std::vector<Tensor>& sample, bool backward) {
  const int64_t n = sharding_group()->size();
  std::vector<Candidate> free;
  std::vector<ShardableLayer*> annotated;
  std::vector<std::tuple<std::string, ShardableLayer*, bool>> order;  // the network's, for the plan
  StrategyPlan plan;
  for (auto& [name, cell] : network.named_cells()) {
    auto* layer = dynamic_cast<ShardableLayer*>(cell);
    if (!layer) continue;
    order.emplace_back(name, layer, !layer->strategy().empty());
    if (!layer->strategy().empty()) {
      annotated.push_back(layer);
      continue;
    }
    Candidate c{name, cell, layer, {}, {}, -1};
    for (auto& [pn, p] : cell->named_parameters()) {
      if (pn.find('.') != std::string::npos) continue;  // a sub-cell's (an activation's)
      const NoGradGuard no_grad;
      c.whole.emplace_back(pn, p.detach().clone());
    }
    free.push_back(std::move(c));
  }
  const auto [dp, mp] = mesh(annotated, n);
  plan.dp = dp;
  plan.mp = mp;
  for (Candidate& c : free) c.options = c.layer->strategy_candidates(dp, mp);
  std::erase_if(free, [](const Candidate& c) { return c.options.empty(); });  // stays whole

  // A candidate the network cannot run (a layer that checks its input's size, a dim that does not
  // split) is priced out; every rank fails the same way, since the trials depend only on shapes.
  constexpr int64_t kInfeasible = std::numeric_limits<int64_t>::max();
  std::string first_failure;
  auto price = [&]() -> int64_t {
    ++plan.trials;
    try {
      return bytes_per_step(region, sample, backward);
    } catch (const Error& e) {
      if (first_failure.empty()) first_failure = e.what();
      return kInfeasible;
    }
  };
  // Tries options of the layers `idx` (all combinations), keeps the cheapest; ties keep the
  // earlier option (the candidates list cuts the weight first).
  auto best_of = [&](const std::vector<size_t>& idx, int64_t current) {
    std::vector<int> before, best;
    for (size_t i : idx) before.push_back(free[i].chosen);
    best = before;
    int64_t best_bytes = current;
    std::vector<int> k(idx.size(), 0);
    std::function<void(size_t)> rec = [&](size_t d) {
      if (d == idx.size()) {
        if (k == before) return;
        for (size_t j = 0; j < idx.size(); ++j) set_choice(free[idx[j]], k[j]);
        const int64_t b = price();
        bool earlier = false;  // a tie goes to the lexicographically earlier options
        for (size_t j = 0; j < idx.size() && !earlier; ++j) {
          if (k[j] != best[j]) {
            earlier = best[j] < 0 || k[j] < best[j];
            break;
          }
        }
        if (b < best_bytes || (b == best_bytes && earlier)) {
          best_bytes = b;
          best = k;
        }
        return;
      }
      for (int o = 0; o < int(free[idx[d]].options.size()); ++o) {
        k[d] = o;
        rec(d + 1);
      }
    };
    rec(0);
    for (size_t j = 0; j < idx.size(); ++j) set_choice(free[idx[j]], best[j]);
    return best_bytes;
  };

  int64_t bytes = 0;
  if (!free.empty()) {
    // Greedy in the network's order: each layer's candidates priced with the earlier choices made.
    for (size_t i = 0; i < free.size(); ++i) {
      set_choice(free[i], 0);
      const int64_t first = price();
      bytes = best_of({i}, first);
    }
    // Revisit: singles with every other choice made, then consecutive pairs, until nothing changes.
    for (int sweep = 0; sweep < 3; ++sweep) {
      const int64_t start = bytes;
      for (size_t i = 0; i < free.size(); ++i) bytes = best_of({i}, bytes);
      for (size_t i = 0; i + 1 < free.size(); ++i) bytes = best_of({i, i + 1}, bytes);
      if (bytes >= start) break;
    }
  }
  bytes = price();
  SPORE_CHECK(bytes != kInfeasible,
              "[auto_parallel] no strategy the search tried runs this network; the first failure: ",
              first_failure);
  plan.bytes_per_step = bytes;
  // Every rank must hold the same plan: compare a digest of the choices.
  {
    int64_t digest = 0;
    for (const Candidate& c : free) digest = (digest * 7 + (c.chosen + 1)) % 1000000007;
    Tensor t = from_vector(std::vector<double>{double(digest), -double(digest)}, {2}, Device{});
    sharding_group()->all_reduce(t, ReduceOp::Max);
    const auto v = t.to_vector<double>();
    SPORE_CHECK(v[0] == -v[1], "[auto_parallel] the ranks chose different strategies (digest ",
                digest, " here); the sample batch must have the same shape on every rank");
  }
  for (const auto& [name, layer, user] : order)
    plan.layers.push_back({name, layer->strategy(), user});
  clear_redistribution_log();  // the trials' lines; the chosen step logs its own
  return plan;
}

}  // namespace spore::parallel
