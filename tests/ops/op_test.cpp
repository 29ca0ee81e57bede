// Every row of the op table, in every dtype it lists, against its reference.
#include <gtest/gtest.h>

#include <cmath>

#include "op_table.h"

namespace spore::test {
namespace {

struct Param {
  size_t index;
  DType dtype;
};

class OpTable : public ::testing::TestWithParam<Param> {};

TEST_P(OpTable, MatchesReference) {
  const OpCase& c = op_cases()[GetParam().index];
  const DType dt = GetParam().dtype;
  Tensors in = make_inputs(c, dt);
  Tensors got = c.run(in);
  // The reference sees float64 copies of float inputs (so its arithmetic is exact enough) and
  // its outputs are compared after both sides are converted to double.
  Tensors ref_in;
  for (const Tensor& t : in) ref_in.push_back(is_floating(t.dtype()) ? t.to(kFloat64) : t);
  Tensors want = c.reference(ref_in);
  ASSERT_EQ(got.size(), want.size()) << c.name;
  const Tolerance tol = tolerance(dt);
  for (size_t k = 0; k < got.size(); ++k) {
    ASSERT_EQ(got[k].shape(), want[k].shape()) << c.name << " output " << k;
    std::vector<double> g = values(got[k]), w = values(want[k]);
    for (size_t i = 0; i < g.size(); ++i) {
      if (std::isnan(w[i])) {
        EXPECT_TRUE(std::isnan(g[i])) << c.name << " output " << k << " element " << i;
        continue;
      }
      ASSERT_NEAR(g[i], w[i], tol.atol + tol.rtol * std::fabs(w[i]))
          << c.name << " [" << dtype_name(dt) << "] output " << k << " element " << i;
    }
  }
}

std::vector<Param> all_params() {
  std::vector<Param> ps;
  for (size_t i = 0; i < op_cases().size(); ++i)
    for (DType dt : op_cases()[i].dtypes) ps.push_back({i, dt});
  return ps;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string n = op_cases()[info.param.index].name + "_" +
                                           dtype_name(info.param.dtype);
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace spore::test
