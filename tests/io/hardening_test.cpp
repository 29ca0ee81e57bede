// Hardening of the checkpoint path (docs/hardening.md): values a float64 checkpoint can hold that
// a float32 or integer parameter cannot (converted as IEEE does: +-inf, saturation, NaN -> 0,
// never undefined behaviour), shapes whose strides would overflow, a one-line load report, and a
// save that hits a file-size limit (an error saying so, the previous file intact).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include "spore/io/checkpoint.h"

using namespace spore;

namespace {

std::string temp_path(const std::string& name) {
  return "/tmp/spore_io_hardening_" + std::to_string(getpid()) + "_" + name;
}

void write_safetensors(const std::string& path, const std::string& header,
                       const std::string& data) {
  std::string file(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(file.data(), &n, 8);
  std::ofstream(path, std::ios::binary) << file << header << data;
}

TEST(CheckpointHardening, Float64BeyondFloat32LoadsAsInfinityAndIntoIntegersNot) {
  const double v[4] = {1e300, -1e300, std::nan(""), 0.5};
  const std::string path = temp_path("f64.safetensors");
  write_safetensors(path, R"({"w":{"dtype":"F64","shape":[4],"data_offsets":[0,32]}})",
                    std::string(reinterpret_cast<const char*>(v), 32));
  const io::Checkpoint ck = io::load_checkpoint(path);
  Tensor f32 = zeros({4}), f16 = zeros({4}).to(kFloat16), i32 = zeros({4}, kInt32),
         u8 = zeros({4}, kUInt8);
  const io::LoadReport rep = io::load_into_tensors({{"w", f32}}, ck.tensors);
  EXPECT_TRUE(rep.ok()) << rep.str();
  const std::vector<float> got = f32.to_vector<float>();
  EXPECT_EQ(got[0], std::numeric_limits<float>::infinity());
  EXPECT_EQ(got[1], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(got[2]));
  EXPECT_EQ(got[3], 0.5f);
  io::load_into_tensors({{"w", f16}}, ck.tensors);
  EXPECT_TRUE(std::isinf(f16.to(kFloat32).to_vector<float>()[0]));
  // Floating values into integer tensors are refused (they would load by value), left untouched.
  for (Tensor* t : {&i32, &u8}) {
    const io::LoadReport r = io::load_into_tensors({{"w", *t}}, ck.tensors);
    ASSERT_EQ(r.mismatched.size(), 1u);
    EXPECT_NE(r.mismatched[0].find("found float64"), std::string::npos) << r.mismatched[0];
    EXPECT_EQ(t->to(kFloat32).to_vector<float>(), (std::vector<float>{0, 0, 0, 0}));
  }
  std::remove(path.c_str());
}

TEST(CheckpointHardening, ShapeWhoseStridesOverflowIsAnError) {
  const std::string path = temp_path("strides.safetensors");
  write_safetensors(
      path, R"({"x":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", "");
  try {
    io::load_checkpoint(path);
    FAIL() << "loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("more elements than a tensor can index"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  // A zero dim with small other dims is a valid empty tensor.
  write_safetensors(path, R"({"x":{"dtype":"F32","shape":[0,3,4],"data_offsets":[0,0]}})", "");
  EXPECT_EQ(io::load_checkpoint(path).tensors.at(0).second.shape(), (Shape{0, 3, 4}));
  std::remove(path.c_str());
}

TEST(CheckpointHardening, ReportSummaryIsOneLineAndGroupsManyNames) {
  io::LoadReport rep;
  rep.missing = {"fc.weight"};
  for (int i = 0; i < 8; ++i)
    rep.unexpected.push_back("moments.layer" + std::to_string(i) + ".weight");
  rep.unexpected.push_back("global_step");
  const std::string s = rep.summary();
  EXPECT_EQ(s.find('\n'), std::string::npos) << s;
  EXPECT_EQ(
      s,
      "1 missing (in the net, not in the checkpoint): fc.weight; 9 unexpected (in the checkpoint, "
      "not in the net): moments.* (8), global_step");
  EXPECT_EQ(io::LoadReport{}.summary(), "");
  EXPECT_EQ(io::summarize_names({"a", "b"}), "a, b");
}

TEST(CheckpointHardening, FileSizeLimitDuringSaveKeepsThePreviousFile) {
  const std::string path = temp_path("limit.safetensors");
  const Tensor small = ones({4});
  io::save_checkpoint({{"w", small}}, path);
  std::ifstream in(path, std::ios::binary);
  const std::string before((std::istreambuf_iterator<char>(in)), {});
  rlimit old{};
  getrlimit(RLIMIT_FSIZE, &old);
  auto* old_handler = signal(SIGXFSZ, SIG_IGN);  // as the CLI does: EFBIG instead of a signal
  rlimit lim = old;
  lim.rlim_cur = 4096;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &lim), 0);
  std::string msg;
  try {
    io::save_checkpoint({{"w", zeros({100000})}}, path);
  } catch (const Error& e) {
    msg = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  signal(SIGXFSZ, old_handler);
  EXPECT_NE(msg.find("file-size limit"), std::string::npos) << msg;
  EXPECT_NE(msg.find("the existing " + path + " is unchanged"), std::string::npos) << msg;
  std::ifstream again(path, std::ios::binary);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), {}), before);
  std::remove(path.c_str());
}

}  // namespace
