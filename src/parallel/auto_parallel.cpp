// auto_parallel's strategy search (spore/parallel/auto_parallel.h): candidates per layer, priced
// by the estimated time of a dry trial step.
#include "spore/parallel/auto_parallel.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <tuple>

#include "ops/op.h"
#include "spore/autograd.h"
#include "spore/error.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"
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

// Each value's largest over the sharding group's ranks.
std::vector<double> max_over_ranks(const std::vector<double>& v) {
  Tensor t = from_vector(v, {int64_t(v.size())}, Device{});
  sharding_group()->all_reduce(t, ReduceOp::Max);
  return t.to_vector<double>();
}

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

std::string CostRates::str() const {
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "%.3g GFLOP/s, %.3g GB/s memory, %.3g GB/s and %.3g us per collective",
                1e-9 / std::max(flop_s, 1e-30), 1e-9 / std::max(memory_byte_s, 1e-30),
                1e-9 / std::max(comm_byte_s, 1e-30), comm_call_s * 1e6);
  return buf;
}

std::string StrategyPlan::summary() const {
  char buf[300];
  std::snprintf(buf, sizeof buf,
                "mesh dp=%lld x mp=%lld, %lld bytes in %lld collectives and %.3g MFLOP per step "
                "on this rank, estimated %.3g ms; %lld trial steps",
                (long long)dp, (long long)mp, (long long)cost.comm_bytes,
                (long long)cost.comm_calls, double(cost.flops) * 1e-6, cost.seconds(rates) * 1e3,
                (long long)trials);
  return buf;
}

CostRates measure_cost_rates() {
  using clock = std::chrono::steady_clock;
  // The median of `reps` timings of fn, after one untimed run (first-touch, caches).
  auto time = [](int reps, const std::function<void()>& fn) {
    fn();
    std::vector<double> t;
    for (int i = 0; i < reps; ++i) {
      const auto t0 = clock::now();
      fn();
      t.push_back(std::chrono::duration<double>(clock::now() - t0).count());
    }
    std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
    return t[size_t(reps / 2)];
  };
  const NoGradGuard no_grad;
  CostRates r;
  // The layers' matmuls are small: a 128 x 128 x 128 one prices them better than a large one.
  constexpr int64_t kN = 128, kElems = 1 << 18;
  const Tensor a = full({kN, kN}, 0.5), b = full({kN, kN}, 0.25);
  r.flop_s = time(9, [&] { (void)matmul(a, b); }) / double(2 * kN * kN * kN);
  const Tensor x = full({kElems}, 1.0), y = full({kElems}, 2.0);
  r.memory_byte_s = time(9, [&] { (void)(x + y); }) / double(3 * kElems * 4);
  const GroupPtr g = sharding_group();
  const int64_t p = g->size();
  if (p > 1) {
    Tensor small = full({1}, 1.0), large = full({kElems}, 1.0);
    r.comm_call_s = time(9, [&] { g->all_reduce(small, ReduceOp::Sum); });
    const double sent = double(2 * (p - 1) * kElems * 4 / p);
    r.comm_byte_s = std::max(time(5, [&] { g->all_reduce(large, ReduceOp::Sum); }) - r.comm_call_s,
                             r.comm_call_s * 1e-3) /
                    sent;
  }
  // Every rank prices with the slowest rank's rates, so every rank makes the same choices.
  const auto v = max_over_ranks({r.flop_s, r.memory_byte_s, r.comm_byte_s, r.comm_call_s});
  return {v[0], v[1], v[2], v[3]};
}

StepCost step_cost(nn::Cell& region, const std::vector<Tensor>& sample, bool backward) {
  const bool was_training = region.training();
  region.set_train(false);  // no running statistics updated, no dropout drawn
  struct Restore {
    nn::Cell& c;
    bool mode;
    ~Restore() { c.set_train(mode); }
  } restore{region, was_training};
  const DryRunScope dry;
  const ops::WorkCounter work;
  reset_comm_count();
  {
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
  }
  const CommCount comm = comm_count();
  const ops::WorkCount w = work.total();
  return {comm.bytes, comm.calls, w.flops, w.bytes};
}

StrategyPlan search_strategies(nn::Cell& network, nn::Cell& region,
                               const std::vector<Tensor>& sample, bool backward,
                               std::optional<CostRates> rates) {
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

  plan.rates = rates ? *rates : measure_cost_rates();
  // A candidate the network cannot run (a layer that checks its input's size, a dim that does not
  // split) is priced out; every rank fails the same way, since the trials depend only on shapes.
  constexpr double kInfeasible = std::numeric_limits<double>::infinity();
  std::string first_failure;
  // The step waits for its slowest rank: the price is the largest over the ranks, which also
  // makes every rank choose the same (a rank's counts can differ where a kernel skips work on
  // the zeros a dry collective leaves).
  auto price = [&]() -> double {
    ++plan.trials;
    double seconds = kInfeasible;
    try {
      seconds = step_cost(region, sample, backward).seconds(plan.rates);
    } catch (const Error& e) {
      if (first_failure.empty()) first_failure = e.what();
    }
    return max_over_ranks({seconds})[0];
  };
  // Tries options of the groups of layers `groups` (all combinations; the layers of one group take
  // the same option index, where each has it), keeps the cheapest; ties keep the earlier option
  // (the candidates list cuts the weight first).
  using Groups = std::vector<std::vector<size_t>>;
  auto best_of = [&](const Groups& groups, double current) {
    std::vector<size_t> idx;  // every layer of the move, group by group
    for (const auto& g : groups) idx.insert(idx.end(), g.begin(), g.end());
    std::vector<int> before, best;
    for (size_t i : idx) before.push_back(free[i].chosen);
    best = before;
    double best_cost = current;
    std::vector<int> k;  // per layer of idx
    std::function<void(size_t)> rec = [&](size_t d) {
      if (d == groups.size()) {
        if (k == before) return;
        for (size_t j = 0; j < idx.size(); ++j) set_choice(free[idx[j]], k[j]);
        const double c = price();
        bool earlier = false;  // a tie goes to the lexicographically earlier options
        for (size_t j = 0; j < idx.size() && !earlier; ++j) {
          if (k[j] != best[j]) {
            earlier = best[j] < 0 || k[j] < best[j];
            break;
          }
        }
        if (c < best_cost || (c == best_cost && earlier)) {
          best_cost = c;
          best = k;
        }
        return;
      }
      size_t n_opt = std::numeric_limits<size_t>::max();
      for (size_t i : groups[d]) n_opt = std::min(n_opt, free[i].options.size());
      for (int o = 0; o < int(n_opt); ++o) {
        k.insert(k.end(), groups[d].size(), o);
        rec(d + 1);
        k.resize(k.size() - groups[d].size());
      }
    };
    rec(0);
    for (size_t j = 0; j < idx.size(); ++j) set_choice(free[idx[j]], best[j]);
    return best_cost;
  };

  double cost = 0;
  if (!free.empty()) {
    // Greedy in the network's order: each layer's candidates priced with the earlier choices made.
    for (size_t i = 0; i < free.size(); ++i) {
      set_choice(free[i], 0);
      const double first = price();
      cost = best_of({{i}}, first);
    }
    // Revisit: singles with every other choice made, consecutive pairs, then runs of two or three
    // layers cut alike followed by one cut its own way (attention's q, k, v by columns and its
    // output projection by rows: no single or pair move reaches that from whole weights), until
    // nothing changes.
    for (int sweep = 0; sweep < 3; ++sweep) {
      const double start = cost;
      for (size_t i = 0; i < free.size(); ++i) cost = best_of({{i}}, cost);
      for (size_t i = 0; i + 1 < free.size(); ++i) cost = best_of({{i}, {i + 1}}, cost);
      for (size_t run = 2; run <= 3; ++run)
        for (size_t i = 0; i + run < free.size(); ++i) {
          std::vector<size_t> alike(run);
          for (size_t j = 0; j < run; ++j) alike[j] = i + j;
          cost = best_of({alike, {i + run}}, cost);
        }
      if (cost >= start) break;
    }
  }
  ++plan.trials;
  try {
    plan.cost = step_cost(region, sample, backward);
  } catch (const Error& e) {
    SPORE_THROW(ErrorKind::ValueError,
                "[auto_parallel] no strategy the search tried runs this network; the first "
                "failure: ",
                first_failure.empty() ? e.what() : first_failure);
  }
  // Every rank must hold the same plan: compare a digest of the choices.
  {
    int64_t digest = 0;
    for (const Candidate& c : free) digest = (digest * 7 + (c.chosen + 1)) % 1000000007;
    const auto v = max_over_ranks({double(digest), -double(digest)});
    SPORE_CHECK(v[0] == -v[1], "[auto_parallel] the ranks chose different strategies (digest ",
                digest, " here); the sample batch must have the same shape on every rank");
  }
  for (const auto& [name, layer, user] : order)
    plan.layers.push_back({name, layer->strategy(), user});
  clear_redistribution_log();  // the trials' lines; the chosen step logs its own
  return plan;
}

}  // namespace spore::parallel
