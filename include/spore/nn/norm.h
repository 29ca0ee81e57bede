// Normalisation layers with MindSpore's names and conventions:
//   BatchNorm1d / BatchNorm2d: parameters gamma, beta; buffers moving_mean, moving_variance;
//     moving = momentum * moving + (1 - momentum) * batch (momentum 0.9), unbiased batch variance.
//     use_batch_statistics unset: batch statistics in training, moving ones in eval; true / false
//     forces one (true still updates the moving statistics).
//   LayerNorm: gamma, beta over normalized_shape; epsilon 1e-7 (MindSpore's default).
//   GroupNorm: (N, C, *) normalised over each group of C / num_groups channels (and all positions);
//     gamma, beta per channel; eps 1e-5.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "spore/nn/cell.h"
#include "spore/nn/init.h"

namespace spore::parallel {
class Group;
}

namespace spore::nn {

struct BatchNormOptions {
  double eps = 1e-5;
  double momentum = 0.9;
  bool affine = true;              // false: gamma / beta stay 1 / 0 (registered, not trained)
  Initializer gamma_init{};        // default: ones
  Initializer beta_init{};         // default: zeros
  Initializer moving_mean_init{};  // default: zeros
  Initializer moving_var_init{};   // default: ones
  std::optional<bool> use_batch_statistics{};
  DType dtype = kFloat32;
};

class BatchNorm : public Cell {
 public:
  // Accepts inputs of rank min_rank..max_rank with channels on axis 1.
  BatchNorm(std::string name, int64_t num_features, BatchNormOptions opt, int64_t min_rank,
            int64_t max_rank);
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;
  Tensor& gamma() { return parameter("gamma"); }
  Tensor& beta() { return parameter("beta"); }
  Tensor& moving_mean() { return buffer("moving_mean"); }
  Tensor& moving_variance() { return buffer("moving_variance"); }

 protected:
  int64_t num_features_, min_rank_, max_rank_;
  BatchNormOptions opt_;
};

// (N, C) or (N, C, L).
class BatchNorm1d : public BatchNorm {
 public:
  explicit BatchNorm1d(int64_t num_features, BatchNormOptions opt = {})
      : BatchNorm("BatchNorm1d", num_features, std::move(opt), 2, 3) {}
};
// (N, C, H, W).
class BatchNorm2d : public BatchNorm {
 public:
  explicit BatchNorm2d(int64_t num_features, BatchNormOptions opt = {})
      : BatchNorm("BatchNorm2d", num_features, std::move(opt), 4, 4) {}
};

// MindSpore's nn.SyncBatchNorm: BatchNorm whose batch statistics are those of the whole batch cut
// over the ranks of a data-parallel group (default: every rank). In training each rank sums its
// rows per channel; one all-reduce gives the mean, a second the biased variance of the whole batch
// (two passes, as one process computes them); the moving statistics then match one process's.
// The all-reduces are ops whose gradient is the all-reduce of the incoming gradients, so each
// rank's input gradient includes the other ranks' losses' dependence on its rows (data parallel
// then averages the parameter gradients as usual). Inputs (N, C), (N, C, L) or (N, C, H, W); the
// ranks may hold different N. Eval (or use_batch_statistics = false) uses the moving statistics, as
// BatchNorm. Code: src/parallel/sync_batch_norm.cpp.
class SyncBatchNorm : public BatchNorm {
 public:
  explicit SyncBatchNorm(int64_t num_features, BatchNormOptions opt = {},
                         std::shared_ptr<parallel::Group> process_group = nullptr);
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;
  // The group the statistics are reduced over (parallel::world() when none was given).
  const std::shared_ptr<parallel::Group>& process_group() const { return group_; }

 private:
  std::shared_ptr<parallel::Group> group_;
};

struct LayerNormOptions {
  int64_t begin_norm_axis = -1;    // normalise over axes [begin_norm_axis, rank)
  int64_t begin_params_axis = -1;  // gamma / beta cover axes [begin_params_axis, rank)
  double epsilon = 1e-7;
  Initializer gamma_init{};  // default: ones
  Initializer beta_init{};   // default: zeros
  DType dtype = kFloat32;
};

class LayerNorm : public Cell {
 public:
  explicit LayerNorm(Shape normalized_shape, LayerNormOptions opt = {});
  Tensor construct(const Tensor& x) override;
  std::string extend_repr() const override;
  Tensor& gamma() { return parameter("gamma"); }
  Tensor& beta() { return parameter("beta"); }

 private:
  Shape normalized_shape_;
  LayerNormOptions opt_;
};

struct GroupNormOptions {
  double eps = 1e-5;
  bool affine = true;        // false: gamma / beta stay 1 / 0 (registered, not trained)
  Initializer gamma_init{};  // default: ones
  Initializer beta_init{};   // default: zeros
  DType dtype = kFloat32;
};

class GroupNorm : public Cell {
 public:
  GroupNorm(int64_t num_groups, int64_t num_channels, GroupNormOptions opt = {});
  Tensor construct(const Tensor& x) override;  // (N, C, *) -> same shape
  std::string extend_repr() const override;
  Tensor& gamma() { return parameter("gamma"); }
  Tensor& beta() { return parameter("beta"); }

 private:
  int64_t groups_, channels_;
  GroupNormOptions opt_;
};

}  // namespace spore::nn
