// auto_parallel (MindSpore's parallel_mode="auto_parallel", search_mode="sharding_propagation"):
// the user cuts a few layers with shard(); the search gives every other Dense / Conv2d a strategy,
// and the engine (sharding.h) propagates the layouts through the ops between them by its layout
// rules, inserting the redistributions.
//
//   parallel::set_auto_parallel_context({.parallel_mode = ParallelMode::AutoParallel,
//                                        .dataset_strategy = {{2, 1}, {2}}, .full_batch = true});
//   net->fc1->shard({{2, 1}, {2, 1}});        // one annotation
//   train::Model model(net, loss, opt);       // the search runs on the first batch (Model::build)
//
// The cost model is the step's time on this machine, estimated from what a dry trial step does:
// the sharded step runs on one real batch with the collectives counting instead of communicating
// (comm_count: bytes and calls) and the kernels counting their work (floating-point operations of
// matmul and the convolutions, bytes of every other kernel). Rates measured once before the search
// (a matmul, an add, a small and a large all-reduce; the slowest rank's) turn the counts into
// seconds: communication alone would leave every weight whole on the model-parallel ranks, each of
// them repeating the same multiplies. The search:
// - the mesh: dp from the first dataset_strategy entry (else the first annotation's batch cut,
//   else all ranks), mp = ranks / dp;
// - each layer without a strategy, in the network's order, takes the candidate (column, row or
//   whole weight; ShardableLayer::strategy_candidates) with the cheapest step given the choices
//   before it (the later layers' weights whole meanwhile);
// - a second sweep revisits every choice with all the others made, and a pair sweep tries each
//   two consecutive layers together (a column layer pays off only with a row layer after it), and
//   a run sweep tries two or three consecutive layers cut alike with the next one cut its own way
//   (attention: q, k, v by columns, the output projection by rows); a change is kept only when
//   it is cheaper. Ties keep the candidate that cuts the weight
//   (less memory).
// A trial's price is the slowest rank's (every rank runs the same trials in step), and the plan is
// checked equal on all ranks before the parameters are cut for good.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/parallel/sharding.h"

namespace spore::parallel {

// What the cost model's counts are worth here: seconds per floating-point operation, per byte a
// kernel touches, per byte a collective sends, and per collective.
struct CostRates {
  double flop_s = 0, memory_byte_s = 0, comm_byte_s = 0, comm_call_s = 0;
  std::string str() const;  // "1.2 GFLOP/s, 3.4 GB/s memory, ..."
};
// Measures them on this machine: a collective call, every rank of the sharding group together;
// each rate is the slowest rank's, so every rank prices the same.
CostRates measure_cost_rates();

// What one step of a sharded region does on this rank (a dry trial).
struct StepCost {
  int64_t comm_bytes = 0, comm_calls = 0, flops = 0, memory_bytes = 0;
  double seconds(const CostRates& r) const {
    return double(flops) * r.flop_s + double(memory_bytes) * r.memory_byte_s +
           double(comm_bytes) * r.comm_byte_s + double(comm_calls) * r.comm_call_s;
  }
};
// One dry trial step of `region` on `sample` with the strategies as they are (backward: the
// backward pass too): the counts the search prices, for comparing with strategies written by hand.
StepCost step_cost(nn::Cell& region, const std::vector<Tensor>& sample, bool backward);

struct StrategyPlan {
  struct Layer {
    std::string name;   // the cell's path in the network ("blocks.0.q")
    Strategy strategy;  // its in_strategy
    bool annotated;     // given by the user (kept), else chosen
  };
  std::vector<Layer> layers;
  int64_t dp = 1, mp = 1;  // the mesh the candidates were made for
  CostRates rates;         // what the counts were priced at
  StepCost cost;           // of the chosen strategies (this rank)
  int64_t trials = 0;      // dry steps the search ran
  // One line per layer: "blocks.0.q  ((2, 1), (2, 1))  user" / "... chosen".
  std::vector<std::string> lines() const;
  // "mesh dp=2 x mp=2, 107820 bytes in 24 collectives and 1.2 GFLOP per step on this rank,
  // est. 3.4 ms; 261 trial steps"
  std::string summary() const;
};

// Chooses the strategies of `network`'s shardable layers that have none, as described above, and
// applies them (their parameters are cut: build the optimizer's state afterwards). `region` is the
// sharded step's forward pass (a ShardedCell around the network or its loss network); `sample` its
// inputs (one batch); backward: price the backward pass too (training). `rates`: measured when
// not given (tests pass fixed ones).
StrategyPlan search_strategies(nn::Cell& network, nn::Cell& region,
                               const std::vector<Tensor>& sample, bool backward,
                               std::optional<CostRates> rates = std::nullopt);

}  // namespace spore::parallel
