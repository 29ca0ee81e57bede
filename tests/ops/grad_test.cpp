// Finite-difference gradient checks in float64 for every differentiable row of the op table:
// L = sum_k sum(out_k * w_k) with fixed random weights w_k; dL/dx from autograd vs central
// differences (L(x + eps) - L(x - eps)) / 2 eps, element by element.
#include <gtest/gtest.h>

#include <cmath>

#include "op_table.h"

namespace spore::test {
namespace {

class GradCheck : public ::testing::TestWithParam<size_t> {};

double weighted_loss(const OpCase& c, const Tensors& in, const Tensors& w) {
  NoGradGuard ng;
  Tensors out = c.run(in);
  double L = 0;
  for (size_t k = 0; k < out.size(); ++k)
    if (w[k].defined()) L += mul(out[k], w[k]).sum().item<double>();
  return L;
}

TEST_P(GradCheck, FiniteDifferences) {
  const OpCase& c = op_cases()[GetParam()];
  Tensors in = make_inputs(c, kFloat64);
  std::vector<size_t> wrt;
  for (size_t i = 0; i < in.size(); ++i)
    if (c.inputs[i].differentiable && in[i].dtype() == kFloat64) {
      in[i] = in[i].detach();
      in[i].set_requires_grad(true);
      wrt.push_back(i);
    }
  ASSERT_FALSE(wrt.empty()) << c.name << ": no differentiable input";
  Tensors out = c.run(in);
  Tensors w;
  Tensor L;
  set_seed(1234);
  for (const Tensor& o : out) {
    if (o.dtype() != kFloat64) {
      w.push_back(Tensor());
      continue;
    }
    Tensor wk = uniform(o.shape(), -1, 1, kFloat64);
    w.push_back(wk);
    Tensor term = mul(o, wk).sum();
    L = L.defined() ? add(L, term) : term;
  }
  ASSERT_TRUE(L.defined()) << c.name;
  Tensors want_for;
  for (size_t i : wrt) want_for.push_back(in[i]);
  Tensors grads = autograd::grad(L, want_for);
  for (size_t j = 0; j < wrt.size(); ++j) {
    Tensor x = in[wrt[j]];
    ASSERT_EQ(grads[j].shape(), x.shape()) << c.name << " input " << wrt[j];
    std::vector<double> analytic = values(grads[j]);
    // Perturb each element in place through the (possibly strided) view.
    const Shape& sh = x.shape();
    for (int64_t flat = 0; flat < x.numel(); ++flat) {
      int64_t off = 0, rem = flat;
      for (size_t d = sh.size(); d-- > 0;) {
        off += (rem % sh[d]) * x.strides()[d];
        rem /= sh[d];
      }
      double* p = static_cast<double*>(x.data_ptr()) + off;
      const double orig = *p;
      *p = orig + c.fd_eps;
      const double lp = weighted_loss(c, in, w);
      *p = orig - c.fd_eps;
      const double lm = weighted_loss(c, in, w);
      *p = orig;
      const double numeric = (lp - lm) / (2 * c.fd_eps);
      const double a = analytic[size_t(flat)];
      ASSERT_NEAR(a, numeric, c.grad_tol * std::max(1.0, std::fabs(numeric)) + 1e-7)
          << c.name << " input " << wrt[j] << " element " << flat;
    }
  }
}

std::vector<size_t> differentiable_cases() {
  std::vector<size_t> idx;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    const OpCase& c = op_cases()[i];
    if (c.grad_check && !ops::op_def(c.op).has(ops::kNonDiff)) idx.push_back(i);
  }
  return idx;
}

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(differentiable_cases()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           std::string n = op_cases()[info.param].name;
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace spore::test
