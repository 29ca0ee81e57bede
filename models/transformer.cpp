#include "models/transformer.h"

#include <random>

#include "spore/nn/container.h"
#include "spore/ops.h"

namespace spore::models {

TransformerBlock::TransformerBlock(int64_t dim, int64_t heads) : dim_(dim), head_dim_(dim / heads) {
  SPORE_CHECK(heads >= 1 && dim % heads == 0, "[TransformerBlock] dim ", dim,
              " must be a multiple of heads ", heads);
  ln1_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{dim});
  ln2_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{dim});
  q_ = std::make_shared<nn::Dense>(dim, dim);
  k_ = std::make_shared<nn::Dense>(dim, dim);
  v_ = std::make_shared<nn::Dense>(dim, dim);
  o_ = std::make_shared<nn::Dense>(dim, dim);
  fc1_ = std::make_shared<nn::Dense>(dim, 4 * dim);
  fc2_ = std::make_shared<nn::Dense>(4 * dim, dim);
  register_cell("ln1", ln1_);
  register_cell("q", q_);
  register_cell("k", k_);
  register_cell("v", v_);
  register_cell("o", o_);
  register_cell("ln2", ln2_);
  register_cell("fc1", fc1_);
  register_cell("fc2", fc2_);
  set_cls_name("TransformerBlock");
}

Tensor TransformerBlock::construct(const Tensor& x) {
  const int64_t b = x.size(0), s = x.size(1);
  const Tensor h = (*ln1_)(x);
  // (B, S, H*hd) -> (B, H, S, hd); H is this rank's heads when q, k, v are column parallel
  auto heads = [&](const Tensor& t) {
    return t.reshape({b, s, t.size(-1) / head_dim_, head_dim_}).permute({0, 2, 1, 3});
  };
  const Tensor q = heads((*q_)(h)), k = heads((*k_)(h)), v = heads((*v_)(h));
  // (B, H, S, hd) -> (B, S, H, hd)
  const Tensor ctx = scaled_dot_product_attention(q, k, v).first.permute({0, 2, 1, 3});
  const Tensor y = x + (*o_)(ctx.reshape({b, s, ctx.size(2) * head_dim_}));
  return y + (*fc2_)(gelu((*fc1_)((*ln2_)(y))));
}

void TransformerBlock::shard(int64_t dp, int64_t mp) {
  for (auto* d : {&q_, &k_, &v_, &fc1_}) (*d)->shard({{dp, 1}, {mp, 1}});  // column parallel
  for (auto* d : {&o_, &fc2_}) (*d)->shard({{dp, mp}, {1, mp}});           // row parallel
}

TransformerClassifier::TransformerClassifier(TransformerOptions opt) : opt_(opt) {
  embed_ = std::make_shared<nn::Embedding>(opt.vocab, opt.dim);
  register_cell("embed", embed_);
  register_parameter("pos", nn::initializer(nn::Normal(0.02), {opt.seq, opt.dim}));
  for (int64_t i = 0; i < opt.layers; ++i) {
    blocks_.push_back(std::make_shared<TransformerBlock>(opt.dim, opt.heads));
    register_cell("block" + std::to_string(i), blocks_.back());
  }
  ln_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{opt.dim});
  head_ = std::make_shared<nn::Dense>(opt.dim, opt.classes);
  register_cell("ln", ln_);
  register_cell("head", head_);
  set_cls_name("TransformerClassifier");
}

Tensor TransformerClassifier::construct(const Tensor& ids) {
  SPORE_CHECK(ids.dim() == 2, "[TransformerClassifier] expected token ids (B, S), got ",
              shape_str(ids.shape()));
  SPORE_CHECK(ids.size(1) == opt_.seq, "[TransformerClassifier] expected ", opt_.seq,
              " positions, got ", ids.size(1));
  Tensor h = (*embed_)(ids) + parameter("pos");  // (B, S, D)
  for (auto& blk : blocks_) h = (*blk)(h);
  return (*head_)(mean((*ln_)(h), {1}));
}

void TransformerClassifier::shard(int64_t dp, int64_t mp) {
  SPORE_CHECK(opt_.heads % mp == 0, "[TransformerClassifier] ", opt_.heads,
              " heads do not split over mp = ", mp, " ranks; use an mp that divides the heads");
  for (auto& blk : blocks_) blk->shard(dp, mp);
}

TokenEmbedding::TokenEmbedding(const TransformerOptions& opt) : seq_(opt.seq) {
  embed_ = std::make_shared<nn::Embedding>(opt.vocab, opt.dim);
  register_cell("embed", embed_);
  register_parameter("pos", nn::initializer(nn::Normal(0.02), {opt.seq, opt.dim}));
  set_cls_name("TokenEmbedding");
}

Tensor TokenEmbedding::construct(const Tensor& ids) {
  SPORE_CHECK(ids.dim() == 2 && ids.size(1) == seq_, "[TokenEmbedding] expected token ids (B, ",
              seq_, "), got ", shape_str(ids.shape()));
  return (*embed_)(ids) + parameter("pos");
}

ClassifierHead::ClassifierHead(const TransformerOptions& opt) {
  ln_ = std::make_shared<nn::LayerNorm>(std::vector<int64_t>{opt.dim});
  head_ = std::make_shared<nn::Dense>(opt.dim, opt.classes);
  register_cell("ln", ln_);
  register_cell("head", head_);
  set_cls_name("ClassifierHead");
}

Tensor ClassifierHead::construct(const Tensor& h) { return (*head_)(mean((*ln_)(h), {1})); }

namespace {

// Which stage block i of `layers` goes to.
int64_t block_stage(int64_t i, int64_t layers, int64_t stages) { return i * stages / layers; }

void check_stages(const TransformerOptions& opt, int64_t stages) {
  SPORE_CHECK(stages >= 1 && opt.layers >= stages, "[transformer] ", opt.layers,
              " blocks cannot fill ", stages,
              " pipeline stages (each stage needs at least one block); use layers >= stages");
}

}  // namespace

std::shared_ptr<nn::SequentialCell> transformer_sequential(const TransformerOptions& opt,
                                                           int64_t stages) {
  check_stages(opt, stages);
  std::vector<std::pair<std::string, nn::CellPtr>> cells;
  cells.emplace_back("embed", std::make_shared<TokenEmbedding>(opt));
  for (int64_t i = 0; i < opt.layers; ++i)
    cells.emplace_back("block" + std::to_string(i),
                       std::make_shared<TransformerBlock>(opt.dim, opt.heads));
  cells.emplace_back("head", std::make_shared<ClassifierHead>(opt));
  if (stages > 1) {
    cells.front().second->set_pipeline_stage(0);
    for (int64_t i = 0; i < opt.layers; ++i)
      cells[size_t(1 + i)].second->set_pipeline_stage(block_stage(i, opt.layers, stages));
    cells.back().second->set_pipeline_stage(stages - 1);
  }
  return std::make_shared<nn::SequentialCell>(cells);
}

std::string transformer_classifier_name(const std::string& n) {
  for (const char* prefix : {"embed.embed.", "head.ln.", "head.head."})
    if (n.rfind(prefix, 0) == 0) return n.substr(n.find('.') + 1);
  if (n == "embed.pos") return "pos";
  return n;
}

std::shared_ptr<nn::SequentialCell> transformer_stage(const TransformerOptions& opt, int64_t s,
                                                      int64_t stages) {
  check_stages(opt, stages);
  SPORE_CHECK(s >= 0 && s < stages, "[transformer] stage ", s, " is not in 0 .. ", stages - 1);
  std::vector<std::pair<std::string, nn::CellPtr>> cells;
  if (s == 0) cells.emplace_back("embed", std::make_shared<TokenEmbedding>(opt));
  for (int64_t i = 0; i < opt.layers; ++i)
    if (block_stage(i, opt.layers, stages) == s)
      cells.emplace_back("block" + std::to_string(i),
                         std::make_shared<TransformerBlock>(opt.dim, opt.heads));
  if (s == stages - 1) cells.emplace_back("head", std::make_shared<ClassifierHead>(opt));
  return std::make_shared<nn::SequentialCell>(cells);
}

std::pair<Tensor, Tensor> make_token_task(int64_t n, const TransformerOptions& opt, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> tok(0, int32_t(opt.vocab) - 1);
  Tensor ids = Tensor::empty({n, opt.seq}, kInt32), labels = Tensor::empty({n}, kInt32);
  int32_t* p = ids.data<int32_t>();
  std::vector<int> count(size_t(opt.vocab));
  for (int64_t i = 0; i < n; ++i) {
    std::fill(count.begin(), count.end(), 0);
    for (int64_t j = 0; j < opt.seq; ++j) ++count[size_t(p[i * opt.seq + j] = tok(rng))];
    const auto best = std::max_element(count.begin(), count.end()) - count.begin();
    labels.data<int32_t>()[i] = int32_t(best % opt.classes);
  }
  return {ids, labels};
}

}  // namespace spore::models
