// The compiled model file (graph/model_file.cpp) and CompiledModel (spore/deploy.h): the compiled
// LeNet-5 and ResNet-18 compute what the source networks compute; a dynamic batch runs as chunks;
// sessions on several threads share one model; and a malformed file (truncated at every field
// boundary of the header and of the meta section, wrong magic or version, lying sizes, flipped
// bytes) is an IOError naming the field, never a crash.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <thread>

#include "graph/model_file.h"
#include "models/lenet.h"
#include "models/resnet.h"
#include "ops/op.h"
#include "spore/deploy.h"
#include "spore/nn/nn.h"
#include "spore/spore.h"

using namespace spore;

namespace {

float max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_vector<float>(), y = b.to_vector<float>();
  EXPECT_EQ(x.size(), y.size());
  float m = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i) m = std::max(m, std::abs(x[i] - y[i]));
  return m;
}
float max_abs(const Tensor& a) {
  float m = 0;
  for (float v : a.to_vector<float>()) m = std::max(m, std::abs(v));
  return m;
}

const std::string& lenet_bytes() {
  static const std::string bytes = [] {
    set_seed(1);
    auto net = std::make_shared<models::LeNet5>();
    return CompiledModel::from_cell(*net, {Tensor::empty({1, 1, 28, 28})}, {.batches = {1, 2}})
        .to_bytes();
  }();
  return bytes;
}

// The error a malformed buffer gives (empty when it loads).
std::string load_error(const std::string& bytes) {
  try {
    CompiledModel::from_buffer(bytes.data(), bytes.size(), "m.spore");
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IOError) << e.what();
    return e.what();
  }
  return "";
}

template <class T>
T get(const std::string& b, size_t off) {
  T v;
  std::memcpy(&v, b.data() + off, sizeof v);
  return v;
}
template <class T>
void put(std::string& b, size_t off, T v) {
  std::memcpy(b.data() + off, &v, sizeof v);
}
uint32_t crc_of(const char* p, size_t n) {
  // The file's CRC-32 (zlib's polynomial), computed here independently of the reader.
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= uint8_t(p[i]);
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
  }
  return ~c;
}
// Rewrites the header's sizes and both checksums so a cut inside the meta section reaches the
// field parser (instead of failing the file_size or checksum checks first).
std::string with_meta(const std::string& file, size_t meta_keep) {
  const uint64_t meta_off = get<uint64_t>(file, 24), meta_bytes = get<uint64_t>(file, 32);
  const uint64_t w_off = get<uint64_t>(file, 40);
  const std::string weights = file.substr(w_off);
  std::string out = file.substr(0, meta_off + meta_keep);
  out.resize((out.size() + 63) / 64 * 64, '\0');
  const uint64_t new_w_off = out.size();
  out += weights;
  (void)meta_bytes;
  put<uint64_t>(out, 16, out.size());
  put<uint64_t>(out, 32, meta_keep);
  put<uint64_t>(out, 40, new_w_off);
  put<uint32_t>(out, 56, crc_of(out.data() + meta_off, meta_keep));
  put<uint32_t>(out, 60, crc_of(out.data(), 60));
  return out;
}

}  // namespace

TEST(ModelFile, LeNetCompiledEqualsTheNetwork) {
  set_seed(1);
  auto net = std::make_shared<models::LeNet5>();
  net->set_train(false);
  CompiledModel m =
      CompiledModel::from_cell(*net, {Tensor::empty({1, 1, 28, 28})}, {.batches = {1, 4}});
  const std::string bytes = m.to_bytes();
  CompiledModel back = CompiledModel::from_buffer(bytes.data(), bytes.size());
  ASSERT_EQ(back.inputs().size(), 1u);
  EXPECT_EQ(back.inputs()[0].shape, (std::vector<int64_t>{-1, 1, 28, 28}));
  EXPECT_EQ(back.outputs()[0].shape, (std::vector<int64_t>{-1, 10}));
  EXPECT_EQ(back.batches(), (std::vector<int64_t>{1, 4}));
  for (int64_t b : {1, 4, 7}) {  // 7: chunks 4 + 1 + 1 + 1
    const Tensor x = randn({b, 1, 28, 28});
    const Tensor want = (*net)(x);
    const Tensor got = back.run({x})[0];
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_LE(max_abs_diff(got, want), 1e-5f * std::max(1.0f, max_abs(want))) << "batch " << b;
  }
  // A loaded model saves again (its weights are views into one storage; each is written from its
  // first element) and runs the same.
  const std::string again = back.to_bytes();
  const Tensor x = randn({4, 1, 28, 28});
  EXPECT_EQ(max_abs_diff(CompiledModel::from_buffer(again.data(), again.size()).run({x})[0],
                         back.run({x})[0]),
            0.0f);
}

TEST(ModelFile, ResNet18CompiledEqualsTheNetwork) {
  set_seed(2);
  auto net = models::resnet18(10, models::ResNetStem::Cifar);
  net->set_train(false);
  // Non-trivial BatchNorm statistics, so folding them into the convs is exercised.
  for (auto& [name, t] : net->named_buffers())
    if (name.find("moving_variance") != std::string::npos)
      t.copy_from_host((rand(t.shape()) + 0.5).to_vector<float>().data());
  CompiledModel m =
      CompiledModel::from_cell(*net, {Tensor::empty({2, 3, 32, 32})}, {.batches = {2}});
  const std::string bytes = m.to_bytes();
  CompiledModel back = CompiledModel::from_buffer(bytes.data(), bytes.size());
  const Tensor x = randn({2, 3, 32, 32});
  const Tensor want = (*net)(x);
  const Tensor got = back.run({x})[0];
  EXPECT_LE(max_abs_diff(got, want), 1e-4f * std::max(1.0f, max_abs(want)));

  // Through a file: load() maps it and runs on the weights where the mapping has them.
  const std::string path = std::string(SPORE_BINARY_DIR) + "/test_tmp_deploy_resnet18.spore";
  m.save(path);
  const Tensor from_file = CompiledModel::load(path).run({x})[0];
  std::remove(path.c_str());
  EXPECT_LE(max_abs_diff(from_file, want), 1e-4f * std::max(1.0f, max_abs(want)));
  // Every convolution here, the stem included, is a packed conv decided at compile time; the
  // timed choices that do travel in files are tested on LeNet-5 below.
}

TEST(ModelFile, TimedConvChoicesTravelInTheFile) {
  // A convolution to 20 channels (not a multiple of 16) stays on oneDNN, whose layout is timed
  // at compile; the choice travels in the file, so a deployed first run need not time it.
  set_seed(1);
  auto net = std::make_shared<nn::Conv2d>(8, 20, 3);
  const std::string bytes =
      CompiledModel::from_cell(*net, {Tensor::empty({8, 8, 32, 32})}, {.batches = {8}}).to_bytes();
  const graph::ModelFile f = graph::read_model_file(bytes.data(), bytes.size(), "lenet.spore");
  EXPECT_NE(f.kernel_choices.find("conv "), std::string::npos) << f.kernel_choices;
}

TEST(ModelFile, MalformedKernelChoicesNameTheField) {
  const std::string& bytes = lenet_bytes();
  graph::ModelFile f = graph::read_model_file(bytes.data(), bytes.size(), "lenet.spore");
  for (const char* bad : {"conv x\n", "conv 2 0 5\n", "conv 2 7 5 1\n", "conv 2 0 5 99\n"}) {
    f.kernel_choices = bad;
    const std::string msg = load_error(graph::write_model_file(f));
    EXPECT_NE(msg.find("field kernel_choices"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find("line 1"), std::string::npos) << bad << ": " << msg;
  }
  f.kernel_choices = "";  // none: the first run times, as without a file
  EXPECT_EQ(load_error(graph::write_model_file(f)), "");
}

// The file names the CPU target only when a graph holds a layout chosen for its vector width
// (blocked channels, packed or Winograd weights): an elementwise model loads on any CPU, and a
// file made for another target is refused, naming the field.
TEST(ModelFile, TargetRequirementsOnlyWhereALayoutDependsOnIt) {
  nn::ReLU relu;
  const std::string plain = CompiledModel::from_cell(relu, {Tensor::empty({2})}).to_bytes();
  EXPECT_EQ(graph::read_model_file(plain.data(), plain.size(), "relu.spore").requirements, "any");
  graph::ModelFile f = graph::read_model_file(lenet_bytes().data(), lenet_bytes().size(), "lenet");
  bool isa = false;
  for (const auto& v : f.variants)
    for (const auto& n : v.graph->nodes)
      isa |= std::string(ops::op_name(n->op)).find("blocked") != std::string::npos ||
             std::string(ops::op_name(n->op)).find("packed") != std::string::npos;
  EXPECT_EQ(f.requirements, isa ? graph::host_requirements() : std::string("any"));
  f.requirements = "AVX9";
  const std::string other = graph::write_model_file(f);
  const std::string err = load_error(other);
  EXPECT_NE(err.find("field target_requirements"), std::string::npos) << err;
  EXPECT_NE(err.find("chosen for CPU target AVX9, this machine's is " + graph::host_requirements()),
            std::string::npos)
      << err;
}

TEST(ModelFile, FuzzSeedsLoad) {
  // The fuzz corpus' hand-made seeds must be valid files of the current format, or the fuzzer
  // starts from inputs the reader refuses at the first field that changed. The same models in
  // format 1 (no stored memory plan: planned at load) and 2 (no value devices) still load.
  for (const char* name :
       {"seed_relu_add.spore", "seed_softmax.spore", "seed_v1_relu_add.spore",
        "seed_v1_softmax.spore", "seed_v2_relu_add.spore", "seed_v2_softmax.spore"}) {
    const std::string path =
        std::string(SPORE_SOURCE_DIR) + "/tests/fuzz/corpus/model_file/" + name;
    CompiledModel m = CompiledModel::load(path);
    ASSERT_EQ(m.inputs().size(), 1u) << name;
    EXPECT_EQ(m.run({zeros({2}, kFloat32)})[0].shape(), (Shape{2})) << name;
    const bool v1 = std::string(name).find("_v1_") != std::string::npos;
    const bool v2 = std::string(name).find("_v2_") != std::string::npos;
    EXPECT_NE(m.summary().find(v1   ? "version 1"
                               : v2 ? "version 2"
                                    : "version 3"),
              std::string::npos)
        << name;
    EXPECT_NE(m.summary().find(v1 ? "(planned at load" : "(stored"), std::string::npos) << name;
  }
}

// Each graph's memory plan is stored after it and checked when read: the plan written is the
// planner's (the loaded model runs on it), and an unsafe plan (buffers that are live at once
// sharing bytes, a misaligned offset) is an IOError naming the field, not memory corruption.
TEST(ModelFile, StoredMemoryPlanIsCheckedAndUsed) {
  const std::string& bytes = lenet_bytes();
  CompiledModel m = CompiledModel::from_buffer(bytes.data(), bytes.size(), "lenet.spore");
  EXPECT_NE(m.summary().find("(stored"), std::string::npos) << m.summary();
  // The last graph's offsets end the meta section, after their count.
  const uint64_t meta_bytes = get<uint64_t>(bytes, 32);
  const std::string meta = bytes.substr(graph::kModelHeaderBytes, meta_bytes);
  uint32_t noff = 0;
  for (uint32_t k = 1; k < 1000 && !noff; ++k)
    if (get<uint32_t>(meta, meta_bytes - 8 * k - 4) == k) noff = k;
  ASSERT_GT(noff, 2u);
  auto with_offsets = [&](const std::function<void(std::string&, size_t)>& edit) {
    std::string mm = meta;
    edit(mm, meta_bytes - 8 * noff);
    std::string b = bytes;
    b.replace(graph::kModelHeaderBytes, meta_bytes, mm);
    put<uint32_t>(b, 56, crc_of(b.data() + graph::kModelHeaderBytes, meta_bytes));
    put<uint32_t>(b, 60, crc_of(b.data(), 60));
    return load_error(b);
  };
  EXPECT_EQ(with_offsets([](std::string&, size_t) {}), "");  // the rewrite itself is faithful
  std::string msg = with_offsets([&](std::string& mm, size_t at) {
    for (uint32_t k = 0; k < noff; ++k) put<uint64_t>(mm, at + 8 * k, 0);  // all at offset 0
  });
  EXPECT_NE(msg.find("field graph 1 memory plan"), std::string::npos) << msg;
  EXPECT_NE(msg.find("are live at once but share bytes"), std::string::npos) << msg;
  msg = with_offsets([&](std::string& mm, size_t at) { put<uint64_t>(mm, at, 8); });
  EXPECT_NE(msg.find("is not 64-byte aligned inside its"), std::string::npos) << msg;
  msg = with_offsets([&](std::string& mm, size_t at) { put<uint64_t>(mm, at, uint64_t(1) << 62); });
  EXPECT_NE(msg.find("field graph 1 memory plan"), std::string::npos) << msg;
  // An arena far larger than the graph's buffers (the u64 before the offsets' count) is refused
  // before anything is allocated (a fuzzed file asked for 446 GB this way).
  msg = with_offsets([&](std::string& mm, size_t at) { put<uint64_t>(mm, at - 12, 0x6800000000); });
  EXPECT_NE(msg.find("more than its buffers laid end to end"), std::string::npos) << msg;
}

TEST(ModelFile, WrongInputsAreErrorsNamingTheInput) {
  const std::string& bytes = lenet_bytes();
  CompiledModel m = CompiledModel::from_buffer(bytes.data(), bytes.size(), "lenet.spore");
  try {
    m.run({randn({1, 3, 28, 28})});
    FAIL() << "a wrong shape ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("input \"input\" must have shape (N, 1, 28, 28), got "
                                         "(1, 3, 28, 28)"),
              std::string::npos)
        << e.what();
  }
  try {
    m.run({randn({1, 1, 28, 28}).to(kFloat64)});
    FAIL() << "a wrong dtype ran";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::TypeError);
    EXPECT_NE(std::string(e.what()).find("must be float32, got float64"), std::string::npos)
        << e.what();
  }
}

TEST(ModelFile, SessionsOnThreadsShareOneModel) {
  const std::string& bytes = lenet_bytes();
  CompiledModel m = CompiledModel::from_buffer(bytes.data(), bytes.size());
  const Tensor x = randn({2, 1, 28, 28});
  const Tensor want = m.run({x})[0];
  std::vector<float> diffs(4, -1);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      InferenceSession s(m);
      float d = 0;
      for (int i = 0; i < 20; ++i) d = std::max(d, max_abs_diff(s.run({x})[0], want));
      diffs[size_t(t)] = d;
    });
  for (auto& t : ts) t.join();
  for (float d : diffs) EXPECT_EQ(d, 0.0f);
}

TEST(ModelFile, TruncatedAtEveryHeaderByteIsAnError) {
  const std::string& bytes = lenet_bytes();
  for (size_t n = 0; n <= graph::kModelHeaderBytes + 8; ++n) {
    const std::string msg = load_error(bytes.substr(0, n));
    EXPECT_NE(msg.find("field "), std::string::npos) << "cut at " << n << ": " << msg;
  }
  // And anywhere in the sections: the header's file_size says so.
  for (size_t n : {bytes.size() / 3, bytes.size() / 2, bytes.size() - 1})
    EXPECT_NE(load_error(bytes.substr(0, n)).find("field file_size"), std::string::npos);
}

TEST(ModelFile, MetaSectionCutAtEveryByteNamesTheField) {
  // Every prefix of the meta section, with a header that agrees (sizes and checksums rewritten):
  // the parser itself meets the end, at every field boundary and inside every field.
  const std::string& bytes = lenet_bytes();
  const uint64_t meta_bytes = get<uint64_t>(bytes, 32);
  ASSERT_EQ(load_error(with_meta(bytes, meta_bytes)), "");  // the rewrite itself is faithful
  size_t named = 0;
  for (size_t k = 0; k < meta_bytes; ++k) {
    const std::string msg = load_error(with_meta(bytes, k));
    ASSERT_FALSE(msg.empty()) << "a meta section cut at " << k << " loaded";
    EXPECT_NE(msg.find("field "), std::string::npos) << k << ": " << msg;
    named +=
        msg.find("truncated") != std::string::npos || msg.find("lying count") != std::string::npos;
  }
  EXPECT_GT(named, meta_bytes / 2);
}

TEST(ModelFile, WrongMagicVersionAndLyingSizesNameTheField) {
  const std::string& bytes = lenet_bytes();
  auto expect = [&](std::string b, const char* field) {
    const std::string msg = load_error(b);
    EXPECT_NE(msg.find(std::string("field ") + field), std::string::npos) << msg;
  };
  std::string b = bytes;
  b[0] = 'X';
  expect(b, "magic");
  b = bytes;
  put<uint32_t>(b, 8, 99);
  expect(b, "format_version");
  EXPECT_NE(load_error(b).find("reads versions 1 to 3"), std::string::npos);
  b = bytes;
  put<uint64_t>(b, 16, 12345);  // file_size lies (header checksum fixed so it is reached)
  put<uint32_t>(b, 60, crc_of(b.data(), 60));
  expect(b, "file_size");
  b = bytes;
  put<uint64_t>(b, 32, get<uint64_t>(b, 32) + 1000000);  // meta_size past the end
  put<uint32_t>(b, 60, crc_of(b.data(), 60));
  expect(b, "meta_size");
  b = bytes;
  b[20] ^= 1;  // a header byte without a fixed checksum
  expect(b, "header_crc32");
  b = bytes;
  b[graph::kModelHeaderBytes + 5] ^= 1;  // a meta byte
  expect(b, "meta_crc32");
  b = bytes;
  b[b.size() - 3] ^= 1;  // a weight byte
  expect(b, "weights_hash64");
  expect("", "magic");
  expect("not a model file at all, but long enough to hold a header of sixty-four bytes.", "magic");
}

TEST(ModelFile, LyingCountsInTheMetaSectionNameTheField) {
  // The first count of the meta section after the five strings and the weights' checksum is the
  // op table's: made huge, the reader refuses it before allocating.
  const std::string& bytes = lenet_bytes();
  const uint64_t meta_bytes = get<uint64_t>(bytes, 32);
  std::string meta = bytes.substr(graph::kModelHeaderBytes, meta_bytes);
  size_t pos = 0;
  for (int s = 0; s < 5; ++s) pos += 4 + get<uint32_t>(meta, pos);
  pos += 8;  // weights_hash64
  put<uint32_t>(meta, pos, 0x7FFFFFFFu);
  std::string b = bytes;
  b.replace(graph::kModelHeaderBytes, meta_bytes, meta);
  put<uint32_t>(b, 56, crc_of(b.data() + graph::kModelHeaderBytes, meta_bytes));
  put<uint32_t>(b, 60, crc_of(b.data(), 60));
  const std::string msg = load_error(b);
  EXPECT_NE(msg.find("field op_table count"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lying count"), std::string::npos) << msg;
}
