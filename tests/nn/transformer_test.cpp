// MultiheadAttention and the transformer layers: parameter names and shapes, the attention against
// an explicit per-head loop, masks, layouts, finite-difference gradients in float64, the stacks'
// copies, and the input checks. (Equality with PyTorch for the same weights:
// tests/python/test_nn_layers_torch.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nn_test_util.h"
#include "spore/nn/nn.h"

using namespace spore;
using nn_test::expect_close;
using nn_test::expect_error;
using nn_test::grad_check;

namespace {

Tensor rand64(const Shape& s, uint64_t seed) {
  set_seed(seed);
  return uniform(s, -1, 1, kFloat64);
}

std::vector<std::string> names(const nn::Cell& c) {
  std::vector<std::string> out;
  for (auto& [n, _] : c.named_parameters()) out.push_back(n);
  return out;
}

// A parameter by its dotted name.
Tensor param(const nn::Cell& c, const std::string& name) {
  for (auto& [n, p] : c.named_parameters())
    if (n == name) return p;
  ADD_FAILURE() << "no parameter " << name;
  return Tensor();
}

}  // namespace

TEST(MultiheadAttention, ParameterNames) {
  nn::MultiheadAttention a(8, 2);
  EXPECT_EQ(names(a), (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                                "out_proj.bias"}));
  nn::MultiheadAttention b(8, 2, {.has_bias = false, .add_bias_kv = true, .kdim = 3, .vdim = 5});
  EXPECT_EQ(names(b), (std::vector<std::string>{"q_proj_weight", "k_proj_weight", "v_proj_weight",
                                                "bias_k", "bias_v", "out_proj.weight"}));
  EXPECT_EQ(b.parameter("k_proj_weight").shape(), (Shape{8, 3}));
  EXPECT_EQ(b.parameter("bias_k").shape(), (Shape{1, 1, 8}));
}

// Against a loop over batches and heads, sequence-first, with both masks.
TEST(MultiheadAttention, EqualsPerHeadLoop) {
  const int64_t E = 6, H = 2, hd = 3, L = 3, S = 4, N = 2;
  nn::MultiheadAttention att(E, H, {.dtype = kFloat64});
  {
    NoGradGuard ng;  // non-zero biases
    assign(param(att, "in_proj_bias"), rand64({3 * E}, 1));
    assign(param(att, "out_proj.bias"), rand64({E}, 17));
  }
  const Tensor q = rand64({L, N, E}, 2), k = rand64({S, N, E}, 3), v = rand64({S, N, E}, 4);
  const Tensor attn_mask =
      from_vector<uint8_t>({0, 0, 0, 1, 0, 1, 0, 0, 0, 0, 0, 0}, {L, S}).to(kBool);
  const Tensor kpm = from_vector<uint8_t>({0, 0, 1, 0, 0, 0, 0, 0}, {N, S}).to(kBool);
  auto [out, w] = att.call(
      q, k, v, {.key_padding_mask = kpm, .attn_mask = attn_mask, .average_attn_weights = false});
  ASSERT_EQ(out.shape(), (Shape{L, N, E}));
  ASSERT_EQ(w.shape(), (Shape{N, H, L, S}));
  const Tensor W = param(att, "in_proj_weight"), B = param(att, "in_proj_bias");
  const Tensor Wo = param(att, "out_proj.weight"), Bo = param(att, "out_proj.bias");
  auto proj = [&](const Tensor& x, int i) {  // (len, N, E) -> (len, N, E)
    return matmul(x, W.slice(0, i * E, (i + 1) * E).t()) + B.slice(0, i * E, (i + 1) * E);
  };
  const auto qp = proj(q, 0).to_vector<double>(), kp = proj(k, 1).to_vector<double>(),
             vp = proj(v, 2).to_vector<double>();
  const auto am = attn_mask.to_vector<double>(), km = kpm.to_vector<double>();
  std::vector<double> ctx(size_t(L * N * E)), wts(size_t(N * H * L * S));
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < L; ++i) {
        std::vector<double> sc(static_cast<size_t>(S));
        double mx = -1e300;
        for (int64_t j = 0; j < S; ++j) {
          double d = 0;
          for (int64_t e = 0; e < hd; ++e)
            d +=
                qp[size_t((i * N + n) * E + h * hd + e)] * kp[size_t((j * N + n) * E + h * hd + e)];
          d /= std::sqrt(double(hd));
          if (am[size_t(i * S + j)] != 0 || km[size_t(n * S + j)] != 0)
            d = -std::numeric_limits<double>::infinity();
          sc[size_t(j)] = d;
          mx = std::max(mx, d);
        }
        double z = 0;
        for (auto& s : sc) z += (s = std::exp(s - mx));
        for (int64_t j = 0; j < S; ++j)
          wts[size_t(((n * H + h) * L + i) * S + j)] = sc[size_t(j)] / z;
        for (int64_t e = 0; e < hd; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < S; ++j)
            acc += sc[size_t(j)] / z * vp[size_t((j * N + n) * E + h * hd + e)];
          ctx[size_t((i * N + n) * E + h * hd + e)] = acc;
        }
      }
  expect_close(w, wts, 1e-10, "weights");
  const Tensor want = matmul(from_vector(ctx, {L, N, E}), Wo.t()) + Bo;
  expect_close(out, want, 1e-10, "output");
  // average_attn_weights: the mean over heads; need_weights = false: no weights.
  auto [out2, wavg] = att.call(q, k, v, {.key_padding_mask = kpm, .attn_mask = attn_mask});
  expect_close(wavg, mean(w, {1}), 1e-12, "averaged weights");
  EXPECT_FALSE(att.call(q, k, v, {.need_weights = false}).second.defined());
}

TEST(MultiheadAttention, LayoutsAndFloatMasksAgree) {
  nn::MultiheadAttention seq(4, 2, {.dtype = kFloat64});
  nn::MultiheadAttention bat(4, 2, {.batch_first = true, .dtype = kFloat64});
  {
    NoGradGuard ng;
    for (auto& [n, p] : bat.named_parameters()) assign(p, param(seq, n));
  }
  const Tensor q = rand64({3, 2, 4}, 5), kv = rand64({5, 2, 4}, 6);
  const Tensor boolmask = greater(rand64({3, 5}, 7), scalar_tensor(0.6, kFloat64));
  const Tensor floatmask = where(
      boolmask, full({}, -std::numeric_limits<double>::infinity(), kFloat64), zeros({}, kFloat64));
  auto [a, wa] = seq.call(q, kv, kv, {.attn_mask = boolmask});
  auto [b, wb] =
      bat.call(q.transpose(0, 1), kv.transpose(0, 1), kv.transpose(0, 1), {.attn_mask = floatmask});
  expect_close(b.transpose(0, 1), a, 1e-12);
  expect_close(wb, wa, 1e-12);
  // Unbatched (L, E) is batch 0 of the batched call.
  auto [u, wu] =
      seq.call(q.select(1, 0), kv.select(1, 0), kv.select(1, 0), {.attn_mask = boolmask});
  expect_close(u, a.select(1, 0), 1e-12);
  expect_close(wu, wa.select(0, 0), 1e-12);
}

TEST(MultiheadAttention, Gradients) {
  for (bool extras : {false, true}) {
    nn::MultiheadAttention att(4, 2,
                               {.add_bias_kv = extras,
                                .add_zero_attn = extras,
                                .kdim = extras ? 3 : 0,
                                .vdim = extras ? 5 : 0,
                                .dtype = kFloat64});
    const Tensor k = rand64({4, 2, extras ? 3 : 4}, 8), v = rand64({4, 2, extras ? 5 : 4}, 9);
    const Tensor kpm = from_vector<uint8_t>({0, 0, 0, 1, 1, 0, 0, 0}, {2, 4}).to(kBool);
    grad_check(
        [&](const Tensor& q) {
          auto [o, w] = att.call(q, k, v, {.key_padding_mask = kpm});
          return concat({o.reshape({-1}), w.reshape({-1})});
        },
        rand64({3, 2, 4}, 10), 1e-6, 1e-6, extras ? "query, extras" : "query");
    const Tensor q = rand64({3, 2, 4}, 11);
    grad_check([&](const Tensor& kk) { return att.call(q, kk, v).first; }, k, 1e-6, 1e-6, "key");
    grad_check([&](const Tensor& vv) { return att.call(q, k, vv).first; }, v, 1e-6, 1e-6, "value");
  }
}

TEST(MultiheadAttention, Errors) {
  expect_error([] { nn::MultiheadAttention(6, 4); }, "embed_dim (6) must be a positive multiple");
  nn::MultiheadAttention att(4, 2);
  const Tensor x = zeros({3, 2, 4});
  expect_error([&] { att.call(x, zeros({3, 2, 5}), x); }, "key with 4 features (kdim)");
  expect_error(
      [&] {
        att.call(x, x, x, {.attn_mask = zeros({3, 4}, kBool)});
      },
      "a 2-d attn_mask must be (L, S) = (3, 3)");
  expect_error(
      [&] {
        att.call(x, x, x, {.key_padding_mask = zeros({3, 2}, kBool)});
      },
      "key_padding_mask must be (N, S) = (2, 3)");
  expect_error(
      [&] {
        att.call(x, x, x, {.attn_mask = zeros({3, 3}, kInt32)});
      },
      "attn_mask must be bool (true = not attended) or float");
  expect_error(
      [&] {
        scaled_dot_product_attention(x, x, x, zeros({3, 3}, kBool));
      },
      "mask must be a float tensor");
}

TEST(TransformerEncoder, CopiesPostAndPreNormGradients) {
  for (bool norm_first : {false, true}) {
    nn::TransformerEncoderLayer layer(4, 2,
                                      {.dim_feedforward = 6,
                                       .dropout = 0.0,
                                       .activation = norm_first ? "gelu" : "relu",
                                       .norm_first = norm_first,
                                       .dtype = kFloat64});
    EXPECT_EQ(names(layer).front(), "self_attn.in_proj_weight");
    nn::TransformerEncoder enc(
        layer, 2,
        std::make_shared<nn::LayerNorm>(Shape{4}, nn::LayerNormOptions{.dtype = kFloat64}));
    const auto n = names(enc);
    EXPECT_EQ(n.front(), "layers.0.self_attn.in_proj_weight");
    EXPECT_EQ(n.back(), "norm.beta");
    // The copies start equal to the layer (and are not the layer's tensors).
    for (auto& [name, p] : enc.named_parameters())
      if (name.rfind("layers.1.", 0) == 0) {
        const std::string local = name.substr(9);
        Tensor ref;
        for (auto& [ln, lp] : layer.named_parameters())
          if (ln == local) ref = lp;
        ASSERT_TRUE(ref.defined()) << name;
        expect_close(p, ref, 0, name);
        EXPECT_NE(p.data_ptr(), ref.data_ptr()) << name;
      }
    enc.set_train(false);
    const Tensor kpm = from_vector<uint8_t>({0, 0, 1, 0, 0, 0}, {2, 3}).to(kBool);
    grad_check([&](const Tensor& x) { return enc.call(x, {}, kpm); }, rand64({3, 2, 4}, 12), 1e-6,
               1e-6, norm_first ? "pre-norm" : "post-norm");
  }
}

TEST(TransformerDecoder, GradientsAndMasks) {
  nn::TransformerDecoderLayer layer(
      4, 2, {.dim_feedforward = 5, .dropout = 0.0, .batch_first = true, .dtype = kFloat64});
  EXPECT_EQ(names(layer)[4], "multihead_attn.in_proj_weight");
  nn::TransformerDecoder dec(layer, 2);
  const Tensor memory = rand64({2, 5, 4}, 13);
  // A causal mask over the target.
  const Tensor causal =
      greater(arange(3, kFloat64).reshape({1, 3}), arange(3, kFloat64).reshape({3, 1}));
  grad_check([&](const Tensor& t) { return dec.call(t, memory, causal); }, rand64({2, 3, 4}, 14),
             1e-6, 1e-6, "tgt");
  grad_check(
      [&](const Tensor& m) {
        return dec.call(rand64({2, 3, 4}, 15), m, causal);
      },
      memory, 1e-6, 1e-6, "memory");
  // Causal: the first target position does not see the later ones.
  const Tensor t = rand64({2, 3, 4}, 16);
  Tensor t2 = t.clone();
  {
    NoGradGuard ng;
    assign(t2.slice(1, 2, 3), zeros({2, 1, 4}, kFloat64));
  }
  expect_close(dec.call(t2, memory, causal).slice(1, 0, 2),
               dec.call(t, memory, causal).slice(1, 0, 2), 1e-12);
  expect_error([] { nn::TransformerDecoderLayer(4, 2, {.activation = "tanh"}); },
               "activation must be 'relu' or 'gelu', got 'tanh'");
}
