// Helpers for the nn tests: value comparison and a central-difference gradient check in float64.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "spore/autograd.h"
#include "spore/context.h"
#include "spore/ops.h"
#include "spore/tensor.h"

namespace nn_test {

using spore::Tensor;

inline void expect_close(const Tensor& t, const std::vector<double>& want, double tol = 1e-5,
                         const std::string& what = "") {
  const std::vector<double> got = t.to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " at flat index " << i;
}

inline void expect_close(const Tensor& a, const Tensor& b, double tol = 1e-5,
                         const std::string& what = "") {
  ASSERT_EQ(a.shape(), b.shape()) << what;
  expect_close(a, b.to_vector<double>(), tol, what);
}

// Compares autograd's d(sum(f(x) * r))/dx with central differences; x must be float64.
inline void grad_check(const std::function<Tensor(const Tensor&)>& f, const Tensor& x0,
                       double h = 1e-6, double tol = 1e-5, const std::string& what = "") {
  ASSERT_EQ(x0.dtype(), spore::kFloat64);
  Tensor x = x0.clone().detach();
  x.set_requires_grad(true);
  Tensor y = f(x);
  // A fixed random-ish cotangent so that every output element matters (not just their sum).
  std::vector<double> rv(size_t(y.numel()));
  for (size_t i = 0; i < rv.size(); ++i) rv[i] = 0.5 + 0.37 * double((i * 7) % 5);
  const Tensor r = spore::from_vector(rv, y.shape());
  const Tensor g = spore::autograd::grad(spore::sum(y * r), {x})[0];
  const std::vector<double> gv = g.to_vector<double>();
  double* p = x.data<double>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    const double keep = p[i];
    double fp, fm;
    {
      spore::NoGradGuard ng;
      p[i] = keep + h;
      fp = spore::sum(f(x) * r).item<double>();
      p[i] = keep - h;
      fm = spore::sum(f(x) * r).item<double>();
      p[i] = keep;
    }
    const double num = (fp - fm) / (2 * h);
    EXPECT_NEAR(gv[size_t(i)], num, tol * (1 + std::abs(num))) << what << " d/dx[" << i << "]";
  }
}

// Expects a spore::Error whose message contains `needle`.
template <typename F>
void expect_error(F&& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "expected an error containing: " << needle;
  } catch (const spore::Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
        << "message was: " << e.what() << "\nexpected to contain: " << needle;
  }
}

}  // namespace nn_test
