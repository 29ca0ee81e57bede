// ONNX import and export in C++: an exported LeNet-5 re-imported gives the network's output in
// Graph mode and PyNative, at two batch sizes (dynamic batch); hand-encoded models (a tiny
// protobuf encoder, independent of Spore's generated code) check the hostile-input rules: every
// malformed file is an error naming the file and the field, an unknown op "unsupported ONNX op X",
// every truncation fails cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "models/lenet.h"
#include "spore/onnx.h"
#include "spore/ops.h"
#include "test_util.h"

using namespace spore;
using spore::test::error_of;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/spore_onnx_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v) b |= 0x80;
    s += char(b);
  } while (v);
  return s;
}
std::string len_field(int num, const std::string& payload) {
  return varint(uint64_t(num) << 3 | 2) + varint(payload.size()) + payload;
}
std::string int_field(int num, uint64_t v) { return varint(uint64_t(num) << 3) + varint(v); }

// ValueInfoProto of a float tensor of the given dims.
std::string value_info(const std::string& name, std::vector<int64_t> dims) {
  std::string shape;
  for (int64_t d : dims) shape += len_field(1, int_field(1, uint64_t(d)));
  return len_field(1, name) + len_field(2, len_field(1, int_field(1, 1) + len_field(2, shape)));
}
std::string node(const std::vector<std::string>& in, const std::string& out,
                 const std::string& op) {
  std::string s;
  for (const auto& i : in) s += len_field(1, i);
  return s + len_field(2, out) + len_field(4, op);
}
// ModelProto: ir_version 8, opset 17, graph {nodes, initializers, input x, output y}.
std::string model(const std::vector<std::string>& nodes,
                  const std::vector<std::string>& inits = {}) {
  std::string g;
  for (const auto& n : nodes) g += len_field(1, n);
  for (const auto& t : inits) g += len_field(5, t);
  g += len_field(11, value_info("x", {2}));
  g += len_field(12, value_info("y", {2}));
  return int_field(1, 8) + len_field(8, int_field(2, 17)) + len_field(7, g);
}
// TensorProto float with raw_data.
std::string init(const std::string& name, std::vector<int64_t> dims, const std::string& raw) {
  std::string s;
  for (int64_t d : dims) s += int_field(1, uint64_t(d));
  return s + int_field(2, 1) + len_field(8, name) + len_field(9, raw);
}

}  // namespace

TEST(OnnxImport, ExportedLeNetRoundTrip) {
  const std::string dir = temp_dir();
  models::LeNet5 net;
  net.set_train(false);
  export_onnx(net, Tensor::empty({1, 1, 28, 28}), dir + "/lenet.onnx");
  OnnxModel m = OnnxModel::load(dir + "/lenet.onnx");
  ASSERT_EQ(m.inputs().size(), 1u);
  EXPECT_EQ(m.inputs()[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  EXPECT_TRUE(m.unsupported_ops().empty());
  for (int64_t b : {1, 3}) {
    const Tensor x = randn({b, 1, 28, 28});
    const std::vector<float> want = net(x).to_vector<float>();
    for (bool graph : {true, false}) {
      const std::vector<float> got = m.run({x}, graph)[0].to_vector<float>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        EXPECT_NEAR(got[i], want[i], 1e-4) << "batch " << b << " graph " << graph;
    }
  }
  // A wrong input shape names the input and the expected shape.
  const std::string e = error_of([&] { m.run({randn({1, 3, 28, 28})}); });
  EXPECT_NE(e.find("N,1,28,28"), std::string::npos) << e;
  // Every truncation of the file: an error or a smaller valid model, never a crash.
  const std::string full = read_file(dir + "/lenet.onnx");
  for (size_t n = 0; n < full.size(); n += 997) {
    write_file(dir + "/cut.onnx", full.substr(0, n));
    try {
      OnnxModel c = OnnxModel::load(dir + "/cut.onnx");
      (void)c.run({randn({1, 1, 28, 28})});
    } catch (const Error& err) {
      EXPECT_NE(std::string(err.what()).find("cut.onnx"), std::string::npos)
          << n << ": " << err.what();
    }
  }
}

TEST(OnnxImport, HandEncodedModelsAndHostileInput) {
  const std::string dir = temp_dir();
  // y = relu(x) + w
  std::string raw(8, '\0');
  const float w[2] = {0.5f, -1.0f};
  std::memcpy(raw.data(), w, 8);
  write_file(dir + "/ok.onnx", model({node({"x"}, "r", "Relu"), node({"r", "w"}, "y", "Add")},
                                     {init("w", {2}, raw)}));
  OnnxModel ok = OnnxModel::load(dir + "/ok.onnx");
  EXPECT_EQ(ok.run({tensor({-2.0, 3.0})}, false)[0].to_vector<float>(),
            (std::vector<float>{0.5f, 2.0f}));
  EXPECT_EQ(ok.run({tensor({-2.0, 3.0})}, true)[0].to_vector<float>(),
            (std::vector<float>{0.5f, 2.0f}));

  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;
  };
  // A model declaring an opset no ONNX release has (its ops may mean something else).
  std::string future = model({node({"x"}, "y", "Relu")});
  const std::string opset17 = len_field(8, int_field(2, 17));
  future.replace(future.find(opset17), opset17.size(), len_field(8, int_field(2, 99)));
  const Case cases[] = {
      {"garbage", "this is not an onnx file at all", "not a valid ONNX model"},
      {"no_graph", int_field(1, 8), "graph"},
      {"undefined_input", model({node({"x", "nope"}, "y", "Add")}), "field input"},
      {"short_raw", model({node({"x", "w"}, "y", "Add")}, {init("w", {3}, raw)}), "raw_data"},
      {"huge_dims", model({node({"x", "w"}, "y", "Add")}, {init("w", {1LL << 30, 1LL << 30}, raw)}),
       "dims"},
      {"no_producer", model({node({"x"}, "z", "Relu")}), "produced by no node"},
      {"future_opset", future, "declares opset 99 of the default ONNX domain"},
      // No graph outputs (running such a model crashed `spore infer`).
      {"no_outputs",
       int_field(1, 8) + len_field(8, int_field(2, 17)) +
           len_field(7,
                     len_field(1, node({"x"}, "y", "Relu")) + len_field(11, value_info("x", {2}))),
       "the graph declares no outputs"},
      {"empty", "", "is empty (0 bytes)"},
  };
  for (const Case& c : cases) {
    const std::string path = dir + "/" + c.name + ".onnx";
    write_file(path, c.bytes);
    const std::string e = error_of([&] { OnnxModel::load(path); });
    EXPECT_NE(e.find(path), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
  }
  // A fixed-arity op given more inputs (Relu(x, x)) ran on the first one silently.
  write_file(dir + "/arity.onnx", model({node({"x", "x"}, "y", "Relu")}));
  const std::string arity = error_of([&] {
    OnnxModel::load(dir + "/arity.onnx").run({tensor({1.0, 2.0})});
  });
  EXPECT_NE(arity.find("has 2 inputs; Relu takes 1"), std::string::npos) << arity;
  // An op the importer does not map: listed, and running says "unsupported ONNX op".
  write_file(dir + "/foo.onnx", model({node({"x"}, "y", "FancyOp")}));
  OnnxModel foo = OnnxModel::load(dir + "/foo.onnx");
  EXPECT_EQ(foo.unsupported_ops(), (std::vector<std::string>{"FancyOp"}));
  const std::string e = error_of([&] { foo.run({tensor({1.0, 2.0})}); });
  EXPECT_NE(e.find("unsupported ONNX op FancyOp"), std::string::npos) << e;
}

// Importer behaviours the node tests see only once per model, on ONNX's own models: a float
// parameter input (Resize's scales) is a compile-time value, so one model object runs with two
// scales and gives two shapes; a model with NonZero runs op by op, so its output shape follows the
// data; INT16 / UINT32 graph inputs are refused by name rather than returned as int32 / int64;
// random ops draw afresh each run and honour the certain cases (p = 0 and 1); Atan, Asin and
// Acos are exact to float32's rounding.
TEST(OnnxImport, ParameterInputsOpByOpRandomAndRefusedTypes) {
  const std::string node = "/usr/share/libonnx-testdata/data/node/";
  if (!std::ifstream(node + "test_nonzero_example/model.onnx"))
    GTEST_SKIP() << node << " is missing (Debian package libonnx-testdata)";

  OnnxModel resize = OnnxModel::load(node + "test_resize_upsample_scales_linear/model.onnx");
  const Tensor x = tensor({1.0, 2.0, 3.0, 4.0}).reshape({1, 1, 2, 2});
  auto scales = [](float s) {
    const float v[4] = {1, 1, s, s};
    return from_buffer(v, {4}, kFloat32);
  };
  const Tensor y2 = resize.run({x, scales(2)})[0], y3 = resize.run({x, scales(3)})[0];
  EXPECT_EQ(y2.shape(), (Shape{1, 1, 4, 4}));
  EXPECT_EQ(y3.shape(), (Shape{1, 1, 6, 6}));
  // half_pixel, scale 2: output 1 reads input 0.25 of the way from 0 to 1 -> 1 + 0.25 (2 - 1).
  EXPECT_FLOAT_EQ(y2.to_vector<float>()[1], 1.25f);
  EXPECT_FLOAT_EQ(resize.run({x, scales(2)})[0].to_vector<float>()[1], 1.25f);  // cached graph

  OnnxModel nz = OnnxModel::load(node + "test_nonzero_example/model.onnx");
  const bool a[4] = {true, false, false, true}, b[4] = {false, false, true, false};
  const Tensor ra = nz.run({from_buffer(a, {2, 2}, kBool)})[0],
               rb = nz.run({from_buffer(b, {2, 2}, kBool)})[0];
  EXPECT_EQ(ra.shape(), (Shape{2, 2}));
  EXPECT_EQ(ra.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 0, 1}));
  EXPECT_EQ(rb.shape(), (Shape{2, 1}));
  EXPECT_EQ(rb.to_vector<int64_t>(), (std::vector<int64_t>{1, 0}));

  for (const char* t : {"test_max_int16", "test_min_uint32"}) {
    const std::string e = error_of([&] { OnnxModel::load(node + t + "/model.onnx"); });
    EXPECT_NE(e.find("unsupported ONNX type"), std::string::npos) << e;
    EXPECT_NE(e.find("as a graph input or output"), std::string::npos) << e;
  }

  // Random ops run op by op, drawing afresh each run: Bernoulli gives 0 where p = 0 and 1 where
  // p = 1; training Dropout's masks differ between two runs.
  OnnxModel bern = OnnxModel::load(node + "test_bernoulli/model.onnx");
  const Tensor p0 = load_onnx_tensor(node + "test_bernoulli/test_data_set_0/input_0.pb");
  const std::vector<double> zeros_got =
      bern.run({zeros_like(p0)})[0].to(kFloat64).to_vector<double>();
  const std::vector<double> ones_got =
      bern.run({ones_like(p0)})[0].to(kFloat64).to_vector<double>();
  for (size_t i = 0; i < zeros_got.size(); ++i) {
    EXPECT_EQ(zeros_got[i], 0) << i;
    EXPECT_EQ(ones_got[i], 1) << i;
  }
  const std::string drop = node + "test_training_dropout_mask/";
  OnnxModel dm = OnnxModel::load(drop + "model.onnx");
  std::vector<Tensor> din;
  for (int k = 0; k < 3; ++k)
    din.push_back(load_onnx_tensor(drop + "test_data_set_0/input_" + std::to_string(k) + ".pb"));
  const std::vector<double> m1 = dm.run(din)[1].to(kFloat64).to_vector<double>(),
                            m2 = dm.run(din)[1].to(kFloat64).to_vector<double>();
  EXPECT_NE(m1, m2) << "two runs drew the same dropout mask";

  // Atan / Asin / Acos (Newton's method on Spore's sin and cos) to float32's rounding over their
  // whole domains, infinities included.
  std::vector<float> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(std::pow(10.0, -4.0 + 8.0 * double(i) / 59));
  v[0] = 0, v[1] = -2.5f, v[2] = INFINITY, v[3] = -INFINITY, v[4] = -1e-3f;
  OnnxModel at = OnnxModel::load(node + "test_atan/model.onnx");
  const std::vector<float> ya =
      at.run({from_buffer(v.data(), {3, 4, 5}, kFloat32)})[0].to_vector<float>();
  std::vector<float> u(60);
  for (size_t i = 0; i < u.size(); ++i) u[i] = -1 + 2 * float(i) / 59;
  OnnxModel as = OnnxModel::load(node + "test_asin/model.onnx"),
            ac = OnnxModel::load(node + "test_acos/model.onnx");
  const Tensor ut = from_buffer(u.data(), {3, 4, 5}, kFloat32);
  const std::vector<float> ys = as.run({ut})[0].to_vector<float>(),
                           yc = ac.run({ut})[0].to_vector<float>();
  for (size_t i = 0; i < 60; ++i) {
    EXPECT_NEAR(ya[i], std::atan(double(v[i])), 2e-7 * std::abs(std::atan(double(v[i])))) << v[i];
    EXPECT_NEAR(ys[i], std::asin(double(u[i])), 2e-7 * std::abs(std::asin(double(u[i])))) << u[i];
    EXPECT_NEAR(yc[i], std::acos(double(u[i])), 2e-7 * std::abs(std::acos(double(u[i])))) << u[i];
  }
}
