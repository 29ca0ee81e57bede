// Every row of the op table on the test device against the same row on the CPU: the test device
// runs the CPU's kernels on memory the host may not touch, so equal outputs (bit for bit: the same
// kernels on the same inputs) prove that dispatch, allocation, transfers and every op's host-side
// code follow the tensor's device instead of assuming the CPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backends/test_device/test_device.h"
#include "op_table.h"

namespace spore::test {
namespace {

const Device kTest{DeviceType::Test, 0};

struct Param {
  size_t index;
  DType dtype;
};
class OpTableOnTestDevice : public ::testing::TestWithParam<Param> {
 protected:
  static void SetUpTestSuite() { enable_test_device(); }
};

// Moves a case's inputs keeping their strides (a transposed input stays transposed).
Tensor to_test(const Tensor& t) {
  if (t.is_contiguous() || t.dim() < 2) return t.to(kTest);
  return t.transpose(-2, -1).contiguous().to(kTest).transpose(-2, -1);
}

TEST_P(OpTableOnTestDevice, EqualsCpu) {
  const OpCase& c = op_cases()[GetParam().index];
  const DType dt = GetParam().dtype;
  const Tensors in = make_inputs(c, dt);
  set_seed(1234);  // random ops draw the same counters on both sides
  const Tensors want = c.run(in);
  Tensors din;
  for (const Tensor& t : in) din.push_back(t.defined() ? to_test(t) : t);
  Tensors got;
  {
    const DeviceGuard on_test(kTest);  // what the row makes itself goes to the test device too
    set_seed(1234);
    got = c.run(din);
  }
  ASSERT_EQ(got.size(), want.size()) << c.name;
  for (size_t k = 0; k < got.size(); ++k) {
    if (!want[k].defined()) continue;
    ASSERT_EQ(got[k].device(), kTest) << c.name << " output " << k << " left the test device";
    ASSERT_EQ(got[k].shape(), want[k].shape()) << c.name << " output " << k;
    ASSERT_EQ(got[k].dtype(), want[k].dtype()) << c.name << " output " << k;
    const Tensor g = got[k].cpu().contiguous(), w = want[k].contiguous();
    const std::vector<double> gv = values(g), wv = values(w);
    for (size_t i = 0; i < gv.size(); ++i) {
      if (std::isnan(wv[i]) && std::isnan(gv[i])) continue;
      ASSERT_EQ(gv[i], wv[i]) << c.name << " [" << dtype_name(dt) << "] output " << k << " element "
                              << i;
    }
  }
}

// Every row but those of the CPU's own ops (kBackendPrivate): the test device runs none of them,
// as an accelerator would not (DeviceRunsNoCpuPrivateOp below checks that it refuses them).
std::vector<Param> all_params() {
  std::vector<Param> ps;
  for (size_t i = 0; i < op_cases().size(); ++i) {
    if (ops::op_def(op_cases()[i].op).has(ops::kBackendPrivate)) continue;
    for (DType dt : op_cases()[i].dtypes) ps.push_back({i, dt});
  }
  return ps;
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTableOnTestDevice, ::testing::ValuesIn(all_params()),
                         [](const ::testing::TestParamInfo<Param>& info) {
                           std::string n = op_cases()[info.param.index].name + "_" +
                                           dtype_name(info.param.dtype);
                           for (char& ch : n)
                             if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// The CPU's own ops (oneDNN post-op fusions, packed and blocked convolutions) have a CPU kernel and
// none on the test device: a pass that puts one on another device fails there, as on a GPU.
TEST(OpTableOnTestDeviceRows, DeviceRunsNoCpuPrivateOp) {
  enable_test_device();
  int private_ops = 0;
  for (const OpCase& c : op_cases()) {
    if (!ops::op_def(c.op).has(ops::kBackendPrivate)) continue;
    ++private_ops;
    EXPECT_NE(ops::find_kernel(c.op, DeviceType::CPU), nullptr) << c.name;
    EXPECT_EQ(ops::find_kernel(c.op, DeviceType::Test), nullptr) << c.name;
  }
  EXPECT_GT(private_ops, 0) << "the op table has rows for the CPU's own ops";
}

}  // namespace
}  // namespace spore::test
