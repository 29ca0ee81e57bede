// The profiler in PyNative: each op is one span with its operands' dtypes and shapes and the bytes
// its outputs took; nothing is recorded while no profiler runs; a second profiler at once is a
// clear error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "spore/profiler.h"
#include "spore/spore.h"

using namespace spore;

namespace {
nlohmann::json read_trace(const std::filesystem::path& dir) {
  std::ifstream f(dir / "trace.json");
  std::stringstream s;
  s << f.rdbuf();
  return nlohmann::json::parse(s.str());
}
}  // namespace

TEST(Profiler, RecordsPyNativeOpsWithShapesAndBytes) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("spore_prof_" + std::to_string(getpid()));
  Tensor a = randn({8, 16}), b = randn({16, 4});
  (void)matmul(a, b);  // before the profiler: not recorded
  Profiler prof({.output_path = dir.string()});
  EXPECT_TRUE(profiling::enabled());
  Tensor c = relu(matmul(a, b));
  const std::string summary = prof.analyse();
  EXPECT_FALSE(profiling::enabled());
  (void)relu(c);  // after: not recorded
  const auto trace = read_trace(dir);
  std::vector<nlohmann::json> ops;
  for (const auto& e : trace.at("traceEvents"))
    if (e.value("cat", "") == "op") ops.push_back(e);
  ASSERT_EQ(ops.size(), 2u) << trace.dump(1);
  EXPECT_EQ(ops[0]["name"], "matmul");
  EXPECT_EQ(ops[0]["args"]["inputs"], nlohmann::json::array({"float32(8, 16)", "float32(16, 4)"}));
  EXPECT_EQ(ops[0]["args"]["outputs"], nlohmann::json::array({"float32(8, 4)"}));
  EXPECT_EQ(ops[0]["args"]["bytes"], 8 * 4 * 4);
  EXPECT_EQ(ops[1]["name"], "relu");
  EXPECT_LE(double(ops[0]["ts"]) + double(ops[0]["dur"]), double(ops[1]["ts"]) + 1e-3);  // in order
  EXPECT_NE(summary.find("matmul"), std::string::npos) << summary;
  EXPECT_NE(summary.find("relu"), std::string::npos) << summary;
  std::filesystem::remove_all(dir);
}

TEST(Profiler, OneAtATime) {
  Profiler a({.output_path = "/tmp/spore_prof_a"});
  try {
    Profiler b({.output_path = "/tmp/spore_prof_b"});
    FAIL() << "two profilers at once";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already recording"), std::string::npos) << e.what();
  }
}
