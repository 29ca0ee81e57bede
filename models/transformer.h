// A small transformer classifier (token embedding + learned positions, pre-norm blocks of
// multi-head self-attention and a GELU MLP, mean pooling, a Dense head): the showcase for
// operator-level sharding. shard(dp, mp) applies Megatron's cuts: q, k, v and the MLP's first layer
// column parallel (heads and hidden units over mp ranks), the attention output and the MLP's second
// layer row parallel (partial sums all-reduced), the batch over dp ranks.
//
// Written for sharding: sizes come from the tensors (a sharded tensor's shape is its piece's).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "spore/nn/nn.h"

namespace spore::models {

struct TransformerOptions {
  int64_t vocab = 32;    // token ids in [0, vocab)
  int64_t seq = 16;      // positions
  int64_t dim = 64;      // model width
  int64_t heads = 4;     // attention heads (dim / heads per head)
  int64_t layers = 2;    // blocks
  int64_t classes = 10;  // outputs
};

class TransformerBlock : public nn::Cell {
 public:
  TransformerBlock(int64_t dim, int64_t heads);
  Tensor construct(const Tensor& x) override;  // (B, S, D) -> (B, S, D)
  void shard(int64_t dp, int64_t mp);

 private:
  int64_t dim_, head_dim_;
  std::shared_ptr<nn::LayerNorm> ln1_, ln2_;
  std::shared_ptr<nn::Dense> q_, k_, v_, o_, fc1_, fc2_;
};

class TransformerClassifier : public nn::Cell {
 public:
  explicit TransformerClassifier(TransformerOptions opt = {});
  Tensor construct(const Tensor& ids) override;  // (B, S) int -> (B, classes)
  // Megatron-style cuts over dp x mp ranks (semi_auto_parallel); before building the optimizer.
  void shard(int64_t dp, int64_t mp);
  const TransformerOptions& options() const { return opt_; }

 private:
  TransformerOptions opt_;
  std::shared_ptr<nn::Embedding> embed_;
  std::vector<std::shared_ptr<TransformerBlock>> blocks_;
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::Dense> head_;
};

// The classifier's two ends as cells of their own, for a pipeline: token embedding + learned
// positions ((B, S) int -> (B, S, D)), and the final norm, mean pooling and head ((B, S, D) ->
// (B, classes)).
class TokenEmbedding : public nn::Cell {
 public:
  explicit TokenEmbedding(const TransformerOptions& opt);
  Tensor construct(const Tensor& ids) override;

 private:
  int64_t seq_;
  std::shared_ptr<nn::Embedding> embed_;
};
class ClassifierHead : public nn::Cell {
 public:
  explicit ClassifierHead(const TransformerOptions& opt);
  Tensor construct(const Tensor& h) override;

 private:
  std::shared_ptr<nn::LayerNorm> ln_;
  std::shared_ptr<nn::Dense> head_;
};

// The classifier as an nn::SequentialCell [embed, block0 .. block{L-1}, head] for pipeline stages.
// Built in TransformerClassifier's order, so the same seed gives the same weights (and the same
// function). stages > 1 marks each cell's pipeline_stage: block i on stage i * stages / layers, the
// embedding on the first stage and the head on the last (layers must be >= stages).
std::shared_ptr<nn::SequentialCell> transformer_sequential(const TransformerOptions& opt = {},
                                                           int64_t stages = 1);
// A parameter's name in transformer_sequential -> its name in TransformerClassifier
// ("embed.embed.embedding_table" -> "embed.embedding_table", "embed.pos" -> "pos",
// "head.ln.gamma" -> "ln.gamma", "head.head.weight" -> "head.weight"; blocks keep theirs).
std::string transformer_classifier_name(const std::string& sequential_name);
// Stage s of transformer_sequential(opt, stages), built alone (the other stages' weights are never
// made): for PipelineTrainer's stage builder. Seed it per stage to repeat it elsewhere.
std::shared_ptr<nn::SequentialCell> transformer_stage(const TransformerOptions& opt, int64_t s,
                                                      int64_t stages);

// A generated sequence-classification task: `n` sequences of random tokens; the label is the token
// that occurs most often (ties: the smallest), modulo `classes`. ids (n, seq) int32, labels (n)
// int32.
std::pair<Tensor, Tensor> make_token_task(int64_t n, const TransformerOptions& opt, uint64_t seed);

}  // namespace spore::models
