// Data-parallel training (MindSpore's mindspore.communication + set_auto_parallel_context +
// nn.DistributedGradReducer), PyNative only (Graph mode does not exist yet):
//   parallel::init();                                   // MPI world (under mpirun / spore launch)
//   parallel::set_auto_parallel_context({.parallel_mode = parallel::ParallelMode::DataParallel,
//                                        .gradients_mean = true});
//   auto ds = data::MnistDataset(dir, "train", {.num_shards = parallel::get_group_size(),
//                                              .shard_id = parallel::get_rank()});
//   train::Model model(net, loss, opt);   // in DataParallel mode the Model installs the reducer
// The reducer broadcasts the parameters from rank 0, checks that every rank has the same
// parameter names, shapes and dtypes, and all-reduces gradients in fused buckets that start
// while the backward pass is still running (autograd's on_grad_ready hook).
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "spore/amp.h"
#include "spore/nn/cell.h"
#include "spore/optim/optimizer.h"
#include "spore/parallel/comm.h"
#include "spore/tensor.h"

namespace spore::train {
class TrainOneStepCell;
}

namespace spore::parallel {

// MindSpore's init(backend_name): "mpi" (default on CPU), "nccl", or "local" (one process).
// Idempotent. Under neither mpirun nor `spore launch` MPI runs as a singleton world of size 1.
void init(const std::string& backend = "mpi");
bool is_initialized();
// Finalises the communication (MindSpore's release()); after a lost peer it only forgets the group
// (finalising would wait for the dead rank).
void release();
// Prints nothing, stops every rank of the job (MPI_Abort) with `code`: the way out after an error
// on one rank, so the others do not wait for it until the deadline.
[[noreturn]] void abort(int code = 1);
GroupPtr world();      // the group from init(); a local group of one when init() was not called
int get_rank();        // 0 when not initialised
int get_group_size();  // 1 when not initialised
// Rank / size the launcher gave this process (OMPI_COMM_WORLD_RANK/SIZE, PMI_RANK/SIZE), without
// initialising anything; {0, 1} when not launched by MPI.
std::pair<int, int> launcher_rank_size();

// SemiAutoParallel: operator-level sharding from the strategies set with shard()
// (spore/parallel/sharding.h), combined with data parallelism through dataset_strategy.
// AutoParallel: the same, with the strategies of the layers the user did not shard() chosen by the
// search (search_mode; spore/parallel/auto_parallel.h) when Model builds its step.
enum class ParallelMode { StandAlone, DataParallel, SemiAutoParallel, AutoParallel };
// Gradient fusion (MindSpore's comm_fusion {"allreduce": {"mode": "size"|"index", "config": ...}}):
// bucket_mb > 0: buckets of about that many MB; fusion_indices non-empty: buckets split before
// these parameter indices (in the optimizer's parameter order); bucket_mb == 0 and no indices:
// one all-reduce per parameter (fusion off).
struct CommFusion {
  double bucket_mb = 64;
  std::vector<int64_t> fusion_indices;
};
struct AutoParallelContext {
  ParallelMode parallel_mode = ParallelMode::StandAlone;
  bool gradients_mean = true;
  CommFusion comm_fusion;
  bool overlap = true;  // start buckets during backward (false: all after backward)
  // Optimizer sharding (ZeRO stage 1): each data-parallel rank keeps 1/size of the optimizer
  // state and updates that part of the parameters (ShardedOptimizer below).
  bool enable_parallel_optimizer = false;
  // Gradient accumulation: a Model's training step updates every k batches (the batches are
  // micro-batches; see TrainOneStepCell::set_grad_accumulation). Also outside data parallel.
  int64_t gradient_accumulation_steps = 1;
  // SemiAutoParallel: the ranks the strategies cut over (0: the group size; otherwise it must equal
  // it), how the step's inputs are cut (one strategy entry per input, MindSpore's dataset_strategy;
  // empty: each input's first dim over all ranks), and whether every rank is given the whole batch
  // (full_batch: each takes its piece) or already its own piece.
  int64_t device_num = 0;
  std::vector<std::vector<int64_t>> dataset_strategy;
  bool full_batch = false;
  // Pipeline parallelism through Model (MindSpore's pipeline_stages and PipelineCell's micro_size):
  // the network (a SequentialCell) is cut into this many stages, one per rank of each replica
  // (ranks / pipeline_stages replicas train data parallel), each step in micro_batch_num
  // micro-batches (0: 2 x pipeline_stages) on the 1F1B schedule.
  int64_t pipeline_stages = 1;
  int64_t micro_batch_num = 0;
  // AutoParallel: MindSpore's search_mode. "sharding_propagation": the user's shard() strategies
  // are kept and each other Dense / Conv2d gets the candidate strategy that moves the fewest bytes
  // per step. "recursive_programming" and "dynamic_programming" (MindSpore's other modes) run the
  // same search, and say so once.
  std::string search_mode = "sharding_propagation";
};
void set_auto_parallel_context(const AutoParallelContext& ctx);
const AutoParallelContext& get_auto_parallel_context();
void reset_auto_parallel_context();

// Checks that every rank holds the same (name, shape, dtype) list, then copies rank 0's values
// into every rank's tensors. A mismatch throws on every rank, naming the ranks and parameters
// that differ.
void broadcast_parameters(const std::vector<std::pair<std::string, Tensor>>& named, Group& group,
                          int root = 0);

// The bucketed gradient all-reduce. Buckets hold parameters of one dtype, taken in reverse order
// (the backward pass produces the last layers' gradients first).
class DistributedGradReducer {
 public:
  // params: the optimizer's parameters (what the gradients are for), with names.
  DistributedGradReducer(std::vector<std::pair<std::string, Tensor>> params, GroupPtr group,
                         bool mean = true, CommFusion fusion = {});
  // Called by the backward pass when gradient i is final: starts its bucket once complete.
  void on_grad_ready(size_t i, const Tensor& grad);
  // Starts the buckets not started yet, waits for all, returns the reduced gradients (views into
  // the fused buffers).
  std::vector<Tensor> operator()(std::vector<Tensor> grads);
  // The buckets as parameter indices (for tests and the bench).
  const std::vector<std::vector<size_t>>& buckets() const { return buckets_; }
  const GroupPtr& group() const { return group_; }

 private:
  void start(size_t b);
  std::vector<std::pair<std::string, Tensor>> params_;
  GroupPtr group_;
  bool mean_;
  std::vector<std::vector<size_t>> buckets_;
  std::vector<size_t> bucket_of_;
  // Per step.
  std::vector<Tensor> grads_;
  std::vector<size_t> ready_count_;
  std::vector<Tensor> buffers_;
  std::vector<WorkPtr> works_;
};

// Optimizer sharding (MindSpore's enable_parallel_optimizer; ZeRO stage 1). The optimizer's
// parameters, flattened in its order into one vector of E elements, are cut into `size` equal
// ranges; rank r keeps the state (moments...) of range r only, as an optimizer of the same kind
// rebuilt over views of the parameters' elements in that range (Optimizer::rebuild). step(grads):
//   pack the local gradients into one flat buffer (E padded to a multiple of size)
//   reduce-scatter (mean)  -> this rank's range of the summed gradient
//   the shard optimizer    -> updates this rank's range of the parameters in place
//   all-gather             -> every rank has every updated element; copied back into the parameters
// The update rules are elementwise, so this equals the unsharded step (global-norm clipping is
// not, and is refused). The wrapped optimizer's state is freed. state() is this rank's shard's
// (views of its range), so checkpoints of a sharded optimizer are per rank (ModelCheckpoint writes
// them under rank_<r>/ with the range in the metadata, "optimizer_shard").
//
// With operator sharding (semi_auto_parallel) the parameters are pieces, and the ranks holding
// the same piece differ from parameter to parameter (a column-parallel weight on dp x mp is
// repeated over dp, a layer norm over all ranks). The second constructor takes, per parameter,
// that group (replica_group_of(layout_of(p)), sharding.h): the parameters of one group are
// flattened and cut over it as above, each group on its own. Its gradients arrive already reduced
// (the engine's mirrors all-reduce them inside backward), so `reduced` skips the reduce-scatter:
// each rank takes its range of the gradient locally, updates it and all-gathers the parameters.
class ShardedOptimizer : public optim::Optimizer {
 public:
  ShardedOptimizer(optim::OptimizerPtr inner, GroupPtr group, bool mean = true);
  ShardedOptimizer(optim::OptimizerPtr inner, std::vector<GroupPtr> group_of_param, bool mean,
                   bool reduced);
  void step(const std::vector<Tensor>& grads) override;
  bool traceable() const override { return false; }  // it communicates
  std::string name() const override { return inner_->name(); }
  // This rank's shard of the state (moments over the elements [shard_begin, shard_end)).
  std::vector<std::pair<std::string, Tensor>> state() const override;
  // "<begin>:<end>": the range this rank's state covers (a checkpoint's "optimizer_shard"); with
  // several groups, one range per group, "<begin>:<end>/<group size>" joined by ",".
  std::string shard_range() const;
  // Per parameter whose state this rank keeps: its name (inner()'s) and the range [begin, end) of
  // its flattened elements the state covers (a checkpoint's "shard.<name>" = "begin:end", from
  // which `spore convert --merge` puts the ranks' parts of the state back together).
  std::vector<std::pair<std::string, std::pair<int64_t, int64_t>>> state_ranges() const;
  const optim::Optimizer& shard() const { return *shard_; }
  // The optimizer it shards (whose parameter names the state carries).
  const optim::Optimizer& inner() const { return *inner_; }
  // This rank's element range [begin, end) of the flattened parameters (of the first group).
  int64_t shard_begin() const { return parts_.empty() ? 0 : parts_[0].begin; }
  int64_t shard_end() const { return parts_.empty() ? 0 : parts_[0].end; }
  // Bytes of optimizer state this rank holds.
  size_t state_bytes() const;

 protected:
  void update(size_t, const Tensor&, double, double) override {}  // step() does the work

 private:
  // The parameters sharded over one group: flattened in the optimizer's order, cut into
  // group-size equal ranges (the last padded).
  struct Part {
    GroupPtr group;
    std::vector<size_t> params;   // indices into parameters()
    std::vector<int64_t> offset;  // per entry of params: its first element in the flat vector
    int64_t begin = 0, end = 0, per_rank = 0;
    Tensor flat_grads, my_grads, my_params, flat_params;  // persistent buffers
    std::vector<size_t> shard_param;  // per shard tensor of this part: the parameter (index)
    std::vector<Tensor> shard_grads;  // views into my_grads, one per shard tensor
    std::vector<Tensor> shard_views;  // views into the parameters, one per shard tensor
  };
  void build(const std::vector<GroupPtr>& group_of_param);
  optim::OptimizerPtr inner_, shard_;
  bool mean_, reduced_ = false;
  std::vector<Part> parts_;
  std::vector<Tensor> shard_grads_;  // every part's shard_grads, in shard_'s parameter order
};

// Pipeline parallelism (MindSpore's pipeline_stages + nn.PipelineCell): the network is a list of
// stages run one after the other, stage s on rank s of the group (the group's size is the number
// of stages). Each rank owns only its stage: its layers, their optimizer state and the activations
// of its micro-batches in flight; the other stages' parameters are released on this rank (or never
// built: the constructor that takes a stage builder). Stage boundaries carry activations forward
// and their gradients backward, nothing else. A step cuts the batch into `micro_batches`
// micro-batches and runs them in the 1F1B order: stage s does (stages - 1 - s) forwards first, then
// alternates one forward and one backward, then finishes the remaining backwards, so stage s holds
// at most (stages - s) micro-batches' activations. The parameter gradients of all micro-batches are
// summed (the loss of each is divided by micro_batches, so a mean loss gives the whole batch's
// gradient), and each rank's optimizer (over its stage's parameters only) steps once.
struct PipelineStats {
  double step_seconds = 0;     // wall time of the last step on this rank
  double compute_seconds = 0;  // of which forward + backward work (the rest: waiting, sending)
  double recv_seconds = 0;     // of the rest: waiting for a neighbour's activation or gradient
  // Memory of this rank in the last step (the CPU allocator's count): the most bytes the step had
  // in use above what was in use when it began (activations and their gradients, the summed
  // parameter gradients, message buffers, temporaries). Resets the allocator's peak each step.
  size_t peak_step_bytes = 0;
  double bubble() const { return step_seconds > 0 ? 1 - compute_seconds / step_seconds : 0; }
};
// What one rank of a pipeline holds: its stage's parameters and buffers, its optimizer state, and
// the last step's peak working memory (PipelineStats::peak_step_bytes).
struct PipelineMemory {
  size_t parameter_bytes = 0, optimizer_bytes = 0, peak_step_bytes = 0;
  size_t total() const { return parameter_bytes + optimizer_bytes + peak_step_bytes; }
};
class PipelineTrainer {
 public:
  using MakeOptimizer = std::function<optim::OptimizerPtr(std::vector<Tensor>)>;
  // stages[s]: the cells of stage s (x -> y); loss_fn(last output, label); make_optimizer builds
  // the optimizer over this rank's stage parameters. Every rank passes the whole list (built with
  // the same seed, so stage s starts from the same weights everywhere); the trainer keeps stage
  // `rank` and releases the storage of every other stage's parameters and buffers (their tensors
  // stay, without data: reading one is an error that names pipeline_stages).
  // dp x pipeline: `group` holds one replica's stages and `data_parallel_group` the ranks running
  // the same stage in the other replicas (each fed its own part of the batch); the stage gradients
  // are averaged over it before the update. Build both with Group::split.
  PipelineTrainer(std::vector<nn::CellPtr> stages, nn::CellPtr loss_fn,
                  MakeOptimizer make_optimizer, int64_t micro_batches, GroupPtr group = nullptr,
                  GroupPtr data_parallel_group = nullptr);
  // The same, but rank s only ever builds stage s: build_stage(s) is called once, with this rank's
  // stage, and num_stages must equal the group's size. For models too large for one rank.
  PipelineTrainer(const std::function<nn::CellPtr(int64_t stage)>& build_stage, int64_t num_stages,
                  nn::CellPtr loss_fn, MakeOptimizer make_optimizer, int64_t micro_batches,
                  GroupPtr group = nullptr, GroupPtr data_parallel_group = nullptr);
  // One training step on the whole batch (every rank passes the same data and label; stage 0 reads
  // data, the last stage label; the others may pass undefined tensors). Returns the batch's loss
  // on every rank.
  Tensor step(const Tensor& data, const Tensor& label);
  // Inference through the stages (no gradients, the batch in one piece): every rank of the group
  // calls it, stage 0 reads x; returns the last stage's output on every rank of the group.
  Tensor predict(const Tensor& x);
  const nn::CellPtr& stage() const { return stage_; }
  int stage_index() const { return rank_; }
  int num_stages() const { return size_; }
  const GroupPtr& group() const { return group_; }
  // Stage 0, when the last step's data required grad: the gradient of the batch's loss with
  // respect to the data (the micro-batches' pieces in order). Undefined otherwise.
  Tensor input_grad() const;
  const optim::OptimizerPtr& optimizer() const { return opt_; }
  const PipelineStats& stats() const { return stats_; }
  // This rank's parameter, optimizer and peak step bytes (after a step).
  PipelineMemory memory() const;
  int64_t micro_batches() const { return m_; }
  // Gradient accumulation (TrainOneStepCell::set_grad_accumulation's mean): each step's gradients,
  // times 1/k, add into buffers (this stage's parameters only) and every k-th step updates.
  void set_grad_accumulation(int64_t k);
  // Loss scaling for mixed precision (amp O1-O3; what TrainOneStepWithLossScaleCell does in one
  // process): the last stage multiplies each micro-batch's loss by the scale, so every stage's
  // gradients come back scaled; each stage divides its own by the scale, and the stages agree
  // (one all-reduce of a flag over the pipeline and the replicas) whether any gradient overflowed.
  // An overflowed step is dropped when the manager says so; every rank updates the scale the same
  // way. Null: no scaling.
  void set_loss_scale_manager(amp::LossScaleManagerPtr manager);
  bool last_overflow() const { return last_overflow_; }
  // Operator-sharded stages (pipeline_stages x semi_auto_parallel): the stage's ranks hold
  // different pieces, so the overflow flag is also maxed over this group (Model: the world).
  void set_overflow_group(GroupPtr g) { overflow_group_ = std::move(g); }

 private:
  void init(MakeOptimizer make_optimizer);
  Tensor forward(int64_t i, const Tensor& data, const Tensor& label);  // micro-batch i
  void backward(int64_t i);
  void send_activation(const Tensor& y, int tag_header, int tag_data);
  Tensor recv_activation(int tag_header, int tag_data);
  void progress();  // drives the pending sends; frees the buffers of those done
  nn::CellPtr stage_;
  nn::CellPtr loss_fn_;
  optim::OptimizerPtr opt_;
  int64_t m_;
  GroupPtr group_, dp_group_, overflow_group_;
  int rank_ = 0, size_ = 1;
  std::vector<Tensor> params_, grads_;
  // Per micro-batch in flight: the stage's input (a leaf needing grad, from the previous stage)
  // and its output (or the micro-batch loss on the last stage).
  std::vector<Tensor> inputs_, outputs_, input_grads_;
  // Sends not known to be done, each with the tensor it reads (kept alive until it is done).
  std::vector<std::pair<WorkPtr, Tensor>> pending_;
  Tensor loss_sum_;
  PipelineStats stats_;
  int64_t predicts_ = 0;  // predict() calls, for their message tags
  // Accumulation over steps (k > 1): the buffers, the steps since the last update and whether one
  // of them was clean (not overflowed).
  int64_t accum_steps_ = 1, accum_done_ = 0;
  bool has_clean_ = false;
  std::vector<Tensor> accum_;
  amp::LossScaleManagerPtr scale_manager_;
  double scale_ = 1;  // this step's loss scale
  bool last_overflow_ = false;
  void apply_update();  // after the micro-batches: reduce, unscale, check, accumulate, step
};

// Releases a tensor's storage in place: every holder keeps its name, shape and dtype, the data is
// freed, and reading it is an error saying it belongs to another pipeline stage. For the
// parameters a rank does not own.
void release_storage(Tensor& t);
bool is_released(const Tensor& t);

// Bytes of an optimizer's state tensors (ShardedOptimizer: this rank's shard).
size_t optimizer_state_bytes(const optim::Optimizer& opt);

// Broadcasts the network's parameters and buffers from rank 0 (checking they match) and installs a
// DistributedGradReducer on `step` with the auto-parallel context's options. named: the network's
// parameters_and_buffers(); the reducer covers the optimizer's parameters.
std::shared_ptr<DistributedGradReducer> setup_data_parallel(
    train::TrainOneStepCell& step, const std::vector<std::pair<std::string, Tensor>>& named,
    GroupPtr group = nullptr);

}  // namespace spore::parallel
