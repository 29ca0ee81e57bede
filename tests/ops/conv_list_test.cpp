// The CPU convolution implementation lists (backends/cpu/kernels/conv_list.h): which entry runs a
// convolution and why the earlier ones declined (choose_conv), SPORE_CONV_IMPL's narrowing and
// its errors, and that the kernels run what the list chose.
#include <gtest/gtest.h>

#include <string>

#include "backends/cpu/kernels/conv_list.h"
#include "backends/cpu/ops/ops.h"
#include "spore/spore.h"

namespace spore::test {
namespace {
using cpu::ConvDesc;
using cpu::ConvProp;

// x (N, C, H, W) * w (O, C, k, k), stride s, padding p on every side.
ConvDesc desc(ConvProp prop, DType t, int64_t N, int64_t C, int64_t HW, int64_t O, int64_t k,
              int64_t s = 1, int64_t p = 0) {
  ConvDesc d;
  d.prop = prop, d.dtype = t, d.N = N, d.C = C, d.H = HW, d.W = HW, d.O = O, d.kh = k, d.kw = k;
  d.OH = d.OW = (HW + 2 * p - k) / s + 1;
  d.sh = d.sw = s, d.pt = d.pb = d.pl = d.pr = p;
  return d;
}

std::string reason(const cpu::ConvChoice& c, const std::string& name) {
  for (const auto& [n, why] : c.declined)
    if (n == name) return why;
  return "(not declined)";
}

ops::Attrs conv_attrs(int64_t p) {
  return ops::Attrs()
      .set("stride", std::vector<int64_t>{1, 1})
      .set("padding", std::vector<int64_t>{p, p, p, p})
      .set("dilation", std::vector<int64_t>{1, 1})
      .set("groups", int64_t(1));
}

TEST(ConvList, ListsEndInTheReference) {
  for (ConvProp p : {ConvProp::kForward, ConvProp::kBackwardData, ConvProp::kBackwardWeight}) {
    ASSERT_FALSE(cpu::conv_impls(p).empty());
    EXPECT_STREQ(cpu::conv_impls(p).back().name, "reference") << cpu::conv_prop_name(p);
  }
  EXPECT_STREQ(cpu::conv_impls(ConvProp::kForward).front().name, "winograd");
}

TEST(ConvList, ManyChannelsRunOnOneDnnAndSayWhy) {
  const cpu::ConvChoice c =
      cpu::choose_conv(desc(ConvProp::kForward, kFloat32, 8, 16, 8, 32, 3, 1, 1));
  EXPECT_STREQ(c.name(), "onednn") << c.str();
  EXPECT_NE(reason(c, "winograd").find("not blocked"), std::string::npos) << c.str();
  EXPECT_NE(reason(c, "direct_nchw").find("16 input channels (at most 4)"), std::string::npos)
      << c.str();
  EXPECT_NE(c.str().find("declined: winograd: "), std::string::npos) << c.str();
}

TEST(ConvList, Float64RunsOnTheReference) {
  for (ConvProp p : {ConvProp::kForward, ConvProp::kBackwardData, ConvProp::kBackwardWeight}) {
    const cpu::ConvChoice c = cpu::choose_conv(desc(p, kFloat64, 2, 3, 8, 4, 3));
    EXPECT_STREQ(c.name(), "reference") << c.str();
    EXPECT_NE(reason(c, "onednn").find("float64"), std::string::npos) << c.str();
  }
}

TEST(ConvList, ConstantWeightsTakeWinogradOrPacked) {
  ConvDesc d = desc(ConvProp::kForward, kFloat32, 64, 16, 16, 32, 3, 1, 1);
  d.blocked_x = d.blocked_y = true;
  d.constant_weights = true;
  EXPECT_STREQ(cpu::choose_conv(d).name(), "winograd") << cpu::choose_conv(d).str();
  d.N = 1, d.H = d.W = d.OH = d.OW = 4;  // 4 output tiles: too few for Winograd
  const cpu::ConvChoice c = cpu::choose_conv(d);
  EXPECT_STREQ(c.name(), "packed") << c.str();
  EXPECT_NE(reason(c, "winograd").find("output tiles"), std::string::npos) << c.str();
  cpu::ScopedConvImpl off("-winograd,-packed");
  EXPECT_STREQ(cpu::choose_conv(d).name(), "onednn") << cpu::choose_conv(d).str();
}

TEST(ConvList, FewChannelsAreTimedAtTheFirstCall) {
  const ConvDesc d = desc(ConvProp::kForward, kFloat32, 3, 1, 13, 5, 3);
  // Before any call the timed entry counts as taking it, and says so.
  const cpu::ConvChoice before = cpu::choose_conv(d);
  EXPECT_STREQ(before.name(), "direct_nchw") << before.str();
  EXPECT_NE(before.note.find("not timed yet"), std::string::npos) << before.str();
  // The first call times direct_nchw against onednn; the verdict is the list's answer from then on.
  ops::call1(ops::OpId::Conv2d, {randn({3, 1, 13, 13}), randn({5, 1, 3, 3})}, conv_attrs(0));
  const cpu::ConvChoice after = cpu::choose_conv(d);
  const std::string s = after.str();
  if (std::string(after.name()) == "direct_nchw")
    EXPECT_NE(s.find("timed at the first call"), std::string::npos) << s;
  else
    EXPECT_NE(reason(after, "direct_nchw").find("onednn measured faster"), std::string::npos) << s;
  // Forced: no timing.
  cpu::ScopedConvImpl force("direct_nchw,onednn,reference");
  EXPECT_STREQ(cpu::choose_conv(d).name(), "direct_nchw");
  EXPECT_NE(cpu::choose_conv(d).note.find("SPORE_CONV_IMPL="), std::string::npos);
}

TEST(ConvList, ForcingAnEntryThatDeclinesIsAClearError) {
  cpu::ScopedConvImpl force("direct_nchw");
  const Tensor x = randn({2, 16, 6, 6}), w = randn({8, 16, 3, 3});
  try {
    ops::call1(ops::OpId::Conv2d, {x, w}, conv_attrs(1));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotImplemented);
    EXPECT_NE(std::string(e.what()).find("direct_nchw: 16 input channels (at most 4)"),
              std::string::npos)
        << e.what();
  }
  // The backward-data list has no direct_nchw: SPORE_CONV_IMPL=direct_nchw leaves it whole.
  EXPECT_STREQ(
      cpu::choose_conv(desc(ConvProp::kBackwardData, kFloat32, 2, 16, 6, 8, 3, 1, 1)).name(),
      "onednn");
}

TEST(ConvList, UnknownNamesAreRejected) {
  try {
    cpu::set_conv_impl_override("onednn,bogus");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("unknown convolution implementation 'bogus'"),
              std::string::npos);
    EXPECT_NE(std::string(e.what()).find("direct_nchw"), std::string::npos) << e.what();
  }
  EXPECT_THROW(cpu::set_conv_impl_override("onednn,-reference"), Error);
  EXPECT_EQ(cpu::conv_impl_override(), "");
}

// Every entry a kernel can run gives the reference's numbers (the lists' contract).
TEST(ConvList, EveryRunnableEntryMatchesTheReference) {
  set_seed(3);
  const Tensor x = randn({2, 3, 9, 9}), w = randn({4, 3, 3, 3}), b = randn({4});
  const ops::Attrs a = conv_attrs(1);
  Tensor want;
  {
    cpu::ScopedConvImpl ref("reference");
    want = ops::call1(ops::OpId::Conv2d, {x, w, b}, a);
  }
  for (const char* name : {"direct_nchw", "onednn", "onednn_blocked", "onednn_plain"}) {
    cpu::ScopedConvImpl force(name);
    const Tensor got = ops::call1(ops::OpId::Conv2d, {x, w, b}, a);
    const auto g = got.to_vector<float>(), r = want.to_vector<float>();
    ASSERT_EQ(g.size(), r.size());
    for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g[i], r[i], 1e-4) << name << " at " << i;
  }
}

}  // namespace
}  // namespace spore::test
