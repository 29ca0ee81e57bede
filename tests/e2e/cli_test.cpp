// End-to-end tests of the `spore` CLI: a short training run on a subset of Fashion-MNIST writes
// its checkpoint, metrics and curves, and `spore eval` reads the checkpoint back; bad flags and
// bad data give clear errors and non-zero exit codes, never a crash.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include "e2e/cli_run.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

namespace fs = std::filesystem;
using spore::e2e::kSpore;
const std::string kData = "/usr/share/datasets/fashion-mnist";

using spore::e2e::Result;
using spore::e2e::run;
fs::path temp_dir(const std::string& name) { return spore::e2e::temp_dir("spore_e2e_", name); }

TEST(Cli, TrainLenetOnASubsetThenEval) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  fs::path out = temp_dir("lenet");
  Result r = run("train lenet --epochs 2 --limit 2048 --eval-limit 512 --batch-size 64 --out " +
                 out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("epoch 2/2: train loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  for (const char* f : {"lenet.safetensors", "metrics.jsonl", "metrics.csv", "curves.png"})
    EXPECT_TRUE(fs::exists(out / f)) << f << "\n" << r.out;
  EXPECT_GT(fs::file_size(out / "curves.png"), 1000u);
  // the metrics file has one line per epoch with the loss falling
  std::ifstream m(out / "metrics.jsonl");
  std::string l1, l2;
  std::getline(m, l1);
  std::getline(m, l2);
  EXPECT_NE(l1.find("\"epoch\":1"), std::string::npos) << l1;
  EXPECT_NE(l2.find("\"epoch\":2"), std::string::npos) << l2;
  Result e = run("eval lenet --ckpt " + (out / "lenet.safetensors").string() + " --limit 512");
  ASSERT_EQ(e.code, 0) << e.out;
  EXPECT_NE(e.out.find("accuracy"), std::string::npos) << e.out;
  fs::remove_all(out);
}

// A mistyped command is named as unknown, with the list of commands (not "A subcommand is
// required").
TEST(Cli, UnknownCommandIsNamed) {
  const Result r = run("frobnicate --epochs 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown command 'frobnicate'; the commands are train, "), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("run-check"), std::string::npos) << r.out;
  EXPECT_EQ(run("--version").code, 0);
  // No command at all: the same list.
  const Result none = run("");
  EXPECT_EQ(none.code, 2) << none.out;
  EXPECT_NE(none.out.find("a command is required: one of train, "), std::string::npos) << none.out;
}

// --port and export's --img say their range as every numeric flag does (CLI11's Range said
// "Value 0 not in range 1 to 65535").
TEST(Cli, PortAndExportImgSayTheirRange) {
  Result r = run("dashboard run --port 0");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--port: expected an integer in [1, 65535], got '0'"), std::string::npos)
      << r.out;
  r = run("export lenet --img 31");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--img: expected an integer in [32, 4096], got '31'"), std::string::npos)
      << r.out;
}

// Detector-only flags given to a classifier were ignored without a word; an unknown `data`
// subcommand was answered "A subcommand is required"; convert's output needs a checkpoint
// extension.
TEST(Cli, FlagsThatDoNotApplyAreRefused) {
  Result r = run("train lenet --weights w.safetensors --epochs 1");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--weights applies to yolov5* only; lenet does not take it"),
            std::string::npos)
      << r.out;
  r = run("eval mlp --ckpt x.safetensors --img 64");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("--img applies to yolov5* only; mlp does not take it"), std::string::npos)
      << r.out;
  r = run("data make-circles --out d");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("unknown command 'data make-circles'; the data commands are make-shapes"),
            std::string::npos)
      << r.out;
  r = run("data");
  EXPECT_EQ(r.code, 2) << r.out;
  EXPECT_NE(r.out.find("data needs a command: one of make-shapes"), std::string::npos) << r.out;
  r = run("convert a.safetensors b.bin");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("b.bin: expected a name ending in .ckpt (MindSpore) or .safetensors"),
            std::string::npos)
      << r.out;
}

// predict's --out is checked before the checkpoint is read and the model runs.
TEST(Cli, PredictChecksItsOutputFirst) {
  Result r = run("predict yolov5n img.jpg --ckpt missing.safetensors --out /nonexistent_dir/p.jpg");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("the folder /nonexistent_dir does not exist"), std::string::npos) << r.out;
  r = run("predict yolov5n img.jpg --ckpt missing.safetensors --out p.txt");
  EXPECT_NE(r.out.find("use .jpg, .png"), std::string::npos) << r.out;
}

// IDX files with no images, or images of another size than LeNet-5's: said of the data, with the
// folder named, and the banner reports the images the data really holds.
TEST(Cli, WrongSizedOrEmptyIdxDataIsNamed) {
  const fs::path dir = temp_dir("idx");
  auto idx = [&](const std::string& name, uint32_t magic, std::vector<uint32_t> dims,
                 size_t bytes) {
    std::string s;
    auto be = [&](uint32_t v) {
      for (int k = 3; k >= 0; --k) s += char((v >> (8 * k)) & 0xff);
    };
    be(magic);
    for (uint32_t d : dims) be(d);
    s += std::string(bytes, '\0');
    std::ofstream(dir / name, std::ios::binary) << s;
  };
  auto write_set = [&](uint32_t n, uint32_t side) {
    for (const char* part : {"train", "t10k"}) {
      idx(std::string(part) + "-images-idx3-ubyte", 0x803, {n, side, side},
          size_t(n) * side * side);
      idx(std::string(part) + "-labels-idx1-ubyte", 0x801, {n}, n);
    }
  };
  write_set(0, 28);
  Result r =
      run("train lenet --epochs 1 --data " + dir.string() + " --out " + (dir / "out").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("the IDX files in " + dir.string() + " (usage 'train') hold no images"),
            std::string::npos)
      << r.out;
  write_set(4, 32);
  r = run("train lenet --epochs 1 --data " + dir.string() + " --out " + (dir / "out2").string());
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("4 train / 4 test images"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the train images are 32x32; lenet and mlp take Fashion-MNIST's 28x28"),
            std::string::npos)
      << r.out;
  fs::remove_all(dir);
}

// Two runs into one --out: the second stops at once naming the first (its pid), and the first
// finishes with its outputs whole (issue 33: both used to train, then overwrite each other).
TEST(Cli, SecondRunIntoTheSameOutIsRefusedAndTheFirstFinishes) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("twice");
  const std::string args =
      "train lenet --epochs 4 --limit 16384 --eval-limit 256 --batch-size 64 --out " + out.string();
  Result first{};
  std::thread a([&] { first = run(args); });
  // Wait until the first run holds the directory (its lock file names it).
  for (int i = 0; i < 600; ++i) {
    std::ifstream f(out / ".spore.lock");
    std::string line;
    if (std::getline(f, line) && line.rfind("pid ", 0) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const Result second = run(args + " --seed 2");
  a.join();
  EXPECT_NE(second.code, 0) << second.out;
  EXPECT_NE(second.out.find("is in use by another run (pid "), std::string::npos) << second.out;
  EXPECT_NE(second.out.find("--out"), std::string::npos) << second.out;
  EXPECT_EQ(second.out.find("epoch 1/4"), std::string::npos) << "the second run trained:\n"
                                                             << second.out;
  ASSERT_EQ(first.code, 0) << first.out;
  EXPECT_TRUE(fs::exists(out / "lenet.safetensors")) << first.out;
  // Once the first run has ended the directory is free again (the lock dies with its process).
  const Result third =
      run("train lenet --epochs 1 --limit 512 --eval-limit 128 --out " + out.string());
  EXPECT_EQ(third.code, 0) << third.out;
  fs::remove_all(out);
}

TEST(Cli, TrainMlpRegressionReportsMseAndMae) {
  fs::path out = temp_dir("reg");
  Result r =
      run("train mlp-regression --epochs 2 --limit 1024 --eval-limit 256 --out " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("mse"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("mae"), std::string::npos) << r.out;
  EXPECT_TRUE(fs::exists(out / "curves.png"));
  fs::remove_all(out);
}

// --device on a device that is not the CPU (the test device, as a GPU would be): the generated
// data stays on the host where data sets keep it, the model trains on the device, and its
// checkpoint is saved (both failed before: the data was made on the device, the save refused it);
// the figures are the CPU run's.
TEST(Cli, TrainOnADeviceKeepsTheDataOnTheHostAndSavesTheCheckpoint) {
  fs::path cpu = temp_dir("reg_cpu"), dev = temp_dir("reg_dev");
  const std::string args = "train mlp-regression --epochs 1 --limit 512 --eval-limit 128 --out ";
  const Result c = run(args + cpu.string());
  const Result d = run(args + dev.string() + " --device Test", "SPORE_TEST_DEVICE=1");
  ASSERT_EQ(c.code, 0) << c.out;
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_TRUE(fs::exists(dev / "mlp-regression.safetensors")) << d.out;
  auto mse = [](const std::string& out) {  // "test mse 193.8787"
    const size_t at = out.rfind("test mse");
    return at == std::string::npos ? std::string() : out.substr(at, out.find(" (", at) - at);
  };
  EXPECT_EQ(mse(d.out), mse(c.out)) << d.out;
  fs::remove_all(cpu);
  fs::remove_all(dev);
}

TEST(Cli, RunCheckPasses) {
  Result r = run("run-check");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("installed on platform [CPU] successfully"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("oneDNN"), std::string::npos) << r.out;
}

TEST(Cli, HelpIsComplete) {
  Result r = run("train --help");
  EXPECT_EQ(r.code, 0);
  for (const char* flag :
       {"--epochs", "--batch-size", "--lr", "--mode", "--data", "--out", "--seed"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST(Cli, BadInputsGiveClearErrors) {
  Result r = run("train lenet --epochs 1 --data /nonexistent/dir --out /tmp/spore_e2e_bad");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("/nonexistent/dir"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dataset-fashion-mnist"), std::string::npos) << r.out;

  r = run("train lenet --epochs zero");
  EXPECT_TRUE(r.code > 0 && r.code < 128) << r.code << " " << r.out;  // CLI11 parse error, no crash
  EXPECT_NE(r.out.find("--epochs"), std::string::npos) << r.out;

  r = run("train alexnet");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("alexnet"), std::string::npos) << r.out;

  // Graph mode is the default; the eager path stays available.
  r =
      run("train lenet --mode pynative --epochs 1 --limit 64 --eval-limit 64 --out "
          "/tmp/spore_e2e_eager");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("final test accuracy"), std::string::npos) << r.out;

  fs::path d = temp_dir("corrupt");
  { std::ofstream(d / "bad.safetensors") << "not a checkpoint"; }
  r = run("eval lenet --ckpt " + (d / "bad.safetensors").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("bad.safetensors"), std::string::npos) << r.out;
  r = run("eval lenet --ckpt " + (d / "missing.safetensors").string());
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("missing.safetensors"), std::string::npos) << r.out;
  fs::remove_all(d);
}

}  // namespace
