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
// The cost model is the bytes the step moves (comm_bytes: every collective of the forward and the
// backward pass, as a ring algorithm moves them), found by a dry trial step: the sharded step runs
// on one real batch with the collectives counting instead of communicating. The search:
// - the mesh: dp from the first dataset_strategy entry (else the first annotation's batch cut,
//   else all ranks), mp = ranks / dp;
// - each layer without a strategy, in the network's order, takes the candidate (column, row or
//   whole weight; ShardableLayer::strategy_candidates) with the fewest bytes per step given the
//   choices before it (the later layers' weights whole meanwhile);
// - a second sweep revisits every choice with all the others made, and a pair sweep tries each
//   two consecutive layers together (a column layer pays off only with a row layer after it);
//   a change is kept only when it moves fewer bytes. Ties keep the candidate that cuts the weight
//   (less memory).
// Every rank runs the same trials (the same shapes give the same bytes), and the plan is checked
// equal on all ranks before the parameters are cut for good.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/parallel/sharding.h"

namespace spore::parallel {

struct StrategyPlan {
  struct Layer {
    std::string name;   // the cell's path in the network ("blocks.0.q")
    Strategy strategy;  // its in_strategy
    bool annotated;     // given by the user (kept), else chosen
  };
  std::vector<Layer> layers;
  int64_t dp = 1, mp = 1;      // the mesh the candidates were made for
  int64_t bytes_per_step = 0;  // of the chosen strategies (this rank)
  int64_t trials = 0;          // dry steps the search ran
  // One line per layer: "blocks.0.q  ((2, 1), (2, 1))  user" / "... chosen".
  std::vector<std::string> lines() const;
};

// Chooses the strategies of `network`'s shardable layers that have none, as described above, and
// applies them (their parameters are cut: build the optimizer's state afterwards). `region` is the
// sharded step's forward pass (a ShardedCell around the network or its loss network); `sample` its
// inputs (one batch); backward: price the backward pass too (training).
StrategyPlan search_strategies(nn::Cell& network, nn::Cell& region,
                               const std::vector<Tensor>& sample, bool backward);

// The bytes one step of `region` moves on this rank with the strategies as they are (one dry
// trial): the cost the search minimises, for comparing with strategies written by hand.
int64_t bytes_per_step(nn::Cell& region, const std::vector<Tensor>& sample, bool backward);

}  // namespace spore::parallel
