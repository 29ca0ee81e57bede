// Operator-level sharding (MindSpore's semi_auto_parallel): tensors cut over the ranks, parameters
// stored as pieces, and the collectives between ops inserted where the layouts of a producer and a
// consumer differ.
//
//   parallel::init();
//   parallel::set_auto_parallel_context({.parallel_mode = ParallelMode::SemiAutoParallel,
//                                        .device_num = 4, .dataset_strategy = {{2, 1}, {2}}});
//   fc1.shard({{2, 1}, {2, 1}});  // column parallel: weight (out, in) cut on out over 2 ranks
//   fc2.shard({{2, 2}, {1, 2}});  // row parallel: the input and weight cut on in; outputs summed
//   auto net = std::make_shared<parallel::ShardedCell>(with_loss);  // the step's sharded region
//
// How it works: each tensor in the sharded region is this rank's piece, and the engine knows its
// Layout. Inside ShardedCell, the dispatcher offers every op to the engine
// (src/parallel/sharding.cpp), which picks the op's output layout from its inputs' (parameters
// first), redistributes the inputs that do not fit (slice, all-gather, all-to-all) and resolves
// partial sums (all-reduce, or reduce-scatter when the Dense's out_strategy asks for a cut output).
// An input kept whole while the op's work is cut over some ranks goes through a "mirror" (identity
// forward, all-reduce of its gradient backward): Megatron's f operator, and the data-parallel
// gradient all-reduce of replicated parameters. Every collective is an op with its own gradient
// rule, so PyNative autograd and Graph mode (traced, compiled) both get the backward collectives.
// Ops the engine has no rule for run on whole inputs (gathered first), which is always correct.
//
// Shapes: inside the region a tensor's shape() is its piece's. Reshapes must take their sizes from
// the tensors (or -1), as models/transformer.cpp does; a target with the whole tensor's element
// count is also understood.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/parallel/comm.h"
#include "spore/tensor.h"

namespace spore::parallel {

// How one dimension is cut: into `parts` pieces; rank r holds piece (r / stride) % parts.
struct DimSplit {
  int64_t stride = 1;
  int64_t parts = 1;
  bool cut() const { return parts > 1; }
  bool operator==(const DimSplit& o) const {
    return parts == o.parts && (parts == 1 || stride == o.stride);
  }
};

// Where a tensor's elements live: one DimSplit per dimension (an empty list or all parts 1: the
// whole tensor on every rank).
struct Layout {
  std::vector<DimSplit> dims;
  static Layout whole(int64_t rank) { return Layout{std::vector<DimSplit>(size_t(rank))}; }
  bool is_whole() const;
  int64_t piece(size_t dim, int rank) const { return (rank / dims[dim].stride) % dims[dim].parts; }
  bool operator==(const Layout& o) const;
  std::string str() const;  // "[4@2, 1, 2@1]": dim 0 in 4 pieces over rank stride 2, dim 1 whole...
  static Layout parse(const std::string& s);  // str()'s text back (checkpoint metadata)
};

// MindSpore's strategy tuples: one per op input, one entry per input dimension (pieces).
using Strategy = std::vector<std::vector<int64_t>>;

// The layout a strategy entry gives a tensor on device_num ranks. Its device matrix is the entry's
// dims in order, then the repeat (device_num / product) as the fastest-varying rank digit.
Layout layout_from_strategy(const std::vector<int64_t>& pieces, int64_t device_num);

// A Dense (MatMul with transposed weight) strategy ((m, k), (n, k)): x (M, K) cut m x k, weight
// (N, K) cut n x k, bias (N) cut n, output (M, N) cut m x n. Device matrix (m, k, n, repeat).
struct DenseLayouts {
  Layout x, weight, bias, out;
};
DenseLayouts dense_layouts(const Strategy& strategy, int64_t device_num);

// A sharded layer's strategy for the op it runs (MindSpore's Primitive.shard(in_strategy,
// out_strategy)): while the scope lives, the first op with id `op` that the engine runs first moves
// its first input to `input` (the strategy's cut of x), and, when its contraction is cut, delivers
// its output cut as `output` (a reduce-scatter) instead of whole (an all-reduce). Dense and Conv2d
// hold one after shard() and open the scope around their op; a null strategy (not sharded) is a
// no-op, so the layers have no sharding branch.
struct OpStrategy {
  enum class Op { Matmul, Conv2d } op;  // the op it is for
  std::optional<Layout> input, output;
};
class OpStrategyScope {
 public:
  explicit OpStrategyScope(const OpStrategy* s);
  ~OpStrategyScope();
  OpStrategyScope(const OpStrategyScope&) = delete;
  OpStrategyScope& operator=(const OpStrategyScope&) = delete;

 private:
  const OpStrategy* prev_;
};

// True while the context's parallel_mode is SemiAutoParallel or AutoParallel and there is more
// than one rank.
bool semi_auto_active();

// A layer with a strategy (nn::Dense, nn::Conv2d): what the strategy search (auto_parallel.h)
// sees of it.
class ShardableLayer {
 public:
  virtual ~ShardableLayer() = default;
  // The in_strategy given to shard() (by the user or the search); empty when none.
  virtual const Strategy& strategy() const = 0;
  // The strategies worth trying on a mesh of dp x mp ranks (the batch over dp), each valid for
  // the layer's sizes: the weight cut on its outputs, on its inputs, or whole.
  virtual std::vector<Strategy> strategy_candidates(int64_t dp, int64_t mp) const = 0;
  virtual void apply_strategy(const Strategy& s) = 0;  // shard(s)
  // Forgets the strategy (the search's trials); the caller puts the whole parameters back
  // (unshard_parameter).
  virtual void clear_strategy() = 0;
};
// Undoes shard_parameter: p holds `whole` again (a copy) and is whole.
void unshard_parameter(Tensor& p, const Tensor& whole);

// What this rank sent through the engine's collectives since reset_comm_count(), forward and
// backward: the bytes, as ring algorithms move them (an all-reduce 2 (p - 1) / p of the tensor, an
// all-gather its p - 1 other pieces, a reduce-scatter and an all-to-all (p - 1) / p; slices and
// mirrors' forward nothing), and the number of collectives that moved any (each pays a latency).
struct CommCount {
  int64_t bytes = 0, calls = 0;
};
CommCount comm_count();
void reset_comm_count();
// While one lives, the engine's collectives count their bytes but move no data (their outputs are
// zeros, or the local input for an all-reduce): the strategy search's trial steps. Local ops run
// as usual. Every rank must run the same trials (subgroups are still made collectively).
class DryRunScope {
 public:
  DryRunScope();
  ~DryRunScope();
  DryRunScope(const DryRunScope&) = delete;
  DryRunScope& operator=(const DryRunScope&) = delete;

 private:
  bool prev_;
};
// True while a ShardedCell's forward runs on this thread (the engine sees every op): where a
// primitive's shard() strategy (Python's Primitive.shard) moves its inputs to the strategy's cut.
bool in_sharded_region();

// What the engine knows about t (whole when nothing).
Layout layout_of(const Tensor& t);
// Marks t as this rank's piece of a tensor with layout l (no data moves).
Tensor mark_piece(const Tensor& t, const Layout& l);
// This rank's piece of the whole tensor `full` (a slice, no communication), marked.
Tensor distribute(const Tensor& full, const Layout& l);
// Moves x (a piece with layout_of(x)) to layout `to`, with the collectives that needs;
// differentiable. Outside a sharded region too.
Tensor redistribute(const Tensor& x, const Layout& to);
// The whole tensor on every rank (all-gathers).
Tensor gather_whole(const Tensor& x);
// In place: p keeps only this rank's piece under l (its storage shrinks), marked. Call before the
// optimizer is built, so its state is made for the piece.
void shard_parameter(Tensor& p, const Layout& l);

// The ranks holding the same piece as this rank under l (those whose rank digits agree on every
// cut of l; all ranks for a whole tensor), as a subgroup ordered by rank: a cut parameter's
// data-parallel group, over which ZeRO-1 shards its optimizer state. Collective the first time a
// set of cuts is asked for: every rank must ask in the same order. Made once per set of cuts.
GroupPtr replica_group_of(const Layout& l);

// The sharded region of a training step: marks the inputs with the context's dataset_strategy
// (each input cut on its first dims; with full_batch the inputs are whole and each rank takes its
// piece, else they already are this rank's piece), runs `network` with the engine on, and returns
// its outputs whole (the loss).
//
// A pipeline stage's region (pipeline_stage = true; Model makes one per stage under
// pipeline_stages x semi_auto_parallel): the input is the previous stage's activation, whole on
// every rank of the stage, and only its first (batch) dim is cut, over the first entry of the
// dataset_strategy's first input (1 when none); the output is made whole for the next stage.
class ShardedCell : public nn::Cell {
 public:
  explicit ShardedCell(nn::CellPtr network, bool pipeline_stage = false);
  std::vector<Tensor> forward(const std::vector<Tensor>& inputs) override;
  Tensor construct(const Tensor& x) override { return forward({x}).at(0); }
  Tensor construct(const Tensor& x, const Tensor& y) override { return forward({x, y}).at(0); }
  nn::Cell& network() { return *net_; }

 private:
  nn::CellPtr net_;
  bool pipeline_stage_ = false;
};

// The redistributions the engine inserted (for IR dumps, tests and --verbose): one line each,
// "all_gather dim 1 of f32[8,16] [1, 2@1] -> [1, 1] (ranks 0 1)".
std::vector<std::string> redistribution_log();
void clear_redistribution_log();

// The ranks the strategies cut over: the world, or with pipeline_stages = P (semi_auto_parallel
// inside pipeline stages) the R / P ranks that run this rank's stage (world ranks r with the same
// r % P, ordered by r / P). A layout's rank digits count ranks of this group. Made (collectively
// over the world) on first use; set the context's pipeline_stages before shard().
GroupPtr sharding_group();

// Parameter and optimizer bytes this rank holds (a figure for the memory report).
int64_t local_bytes(const std::vector<Tensor>& tensors);

}  // namespace spore::parallel
