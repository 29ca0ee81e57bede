// `spore launch` end to end (each test starts its own 2-rank job, so these run only as a plain
// process, never inside the np2 ctest run): a killed rank and a hung rank stop the job with a
// message naming the lost rank within the deadline; a checkpoint from before the fault resumes to
// the same weights as an uninterrupted run.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "spore/io/checkpoint.h"
#include "spore/parallel/parallel.h"

namespace fs = std::filesystem;
using namespace spore;

namespace {

const std::string kSpore = std::string(SPORE_BINARY_DIR) + "/spore";

struct Result {
  int code;
  std::string out;
  double seconds;
};

// A clean environment for an inner mpirun (no OMPI_* from an outer one).
const std::string kCleanEnv =
    "env -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE OMP_NUM_THREADS=1 ";

// Runs a shell command with its output (stdout and stderr) captured and its wall time.
Result shell(const std::string& cmd) {
  const auto t0 = std::chrono::steady_clock::now();
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  std::string out;
  char buf[4096];
  while (size_t n = fread(buf, 1, sizeof(buf), p)) out.append(buf, n);
  const int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status), out,
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count()};
}

// Runs `spore launch -n 2 [env] -- spore train <model> <args>`.
Result launch(const std::string& env, const std::string& args, const std::string& model = "lenet") {
  return shell(kCleanEnv + env + " " + kSpore + " launch -n 2 -- spore train " + model + " " +
               args);
}

// A job whose rank 1 stopped: it failed within the deadline (5 s) plus start-up, naming rank 1.
void expect_lost_rank_named(const Result& r, const std::string& what) {
  std::printf("%s: exit %d after %.1f s:\n%s\n", what.c_str(), r.code, r.seconds, r.out.c_str());
  EXPECT_NE(r.code, 0) << what;
  EXPECT_LT(r.seconds, 45) << what;
  EXPECT_NE(r.out.find("rank 1 did not respond within 5 s (lost?)"), std::string::npos)
      << what << "\n"
      << r.out;
}

bool skip() {
  return parallel::launcher_rank_size().second > 1 || !parallel::have_mpi() ||
         !fs::exists(kSpore) || !fs::exists("/usr/share/datasets/fashion-mnist");
}

// 512 images, global batch 64 (32 per rank): 8 steps per epoch.
const std::string kArgs = "--limit 512 --eval-limit 256 --batch-size 64 --comm-timeout 5 --seed 3 ";

fs::path tmp(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("spore_parallel_" + name + "_" + std::to_string(getpid()));
  fs::remove_all(d);
  return d;
}

// The two checkpoints hold the same tensors, to 1e-4 relative.
void expect_same_weights(const fs::path& a, const fs::path& b) {
  const io::Checkpoint pa = io::load_checkpoint(a.string()), pb = io::load_checkpoint(b.string());
  ASSERT_EQ(pa.tensors.size(), pb.tensors.size());
  for (size_t i = 0; i < pa.tensors.size(); ++i) {
    EXPECT_EQ(pa.tensors[i].first, pb.tensors[i].first);
    const auto va = pa.tensors[i].second.to_vector<float>(),
               vb = pb.tensors[i].second.to_vector<float>();
    ASSERT_EQ(va.size(), vb.size()) << pa.tensors[i].first;
    for (size_t k = 0; k < va.size(); ++k)
      ASSERT_NEAR(va[k], vb[k], 1e-4 * (1 + std::abs(va[k])))
          << b << " " << pa.tensors[i].first << "[" << k << "]";
  }
}

// The same tensors under the same names, in any order (a merged pipeline checkpoint holds them in
// stage order).
void expect_same_tensors_by_name(const fs::path& a, const fs::path& b) {
  const io::Checkpoint pa = io::load_checkpoint(a.string()), pb = io::load_checkpoint(b.string());
  ASSERT_EQ(pa.tensors.size(), pb.tensors.size()) << a << " " << b;
  for (const auto& [name, t] : pa.tensors) {
    const Tensor* o = pb.find(name);
    ASSERT_NE(o, nullptr) << b << " has no " << name;
    const auto va = t.to_vector<float>(), vb = o->to_vector<float>();
    ASSERT_EQ(va.size(), vb.size()) << name;
    for (size_t k = 0; k < va.size(); ++k)
      ASSERT_NEAR(va[k], vb[k], 1e-4 * (1 + std::abs(va[k])))
          << b << " " << name << "[" << k << "]";
  }
}

// `spore train <model> <args>` as one process (no launcher); true when it succeeded.
bool train_one_process(const std::string& model, const std::string& args) {
  return shell(kCleanEnv + kSpore + " train " + model + " " + args).code == 0;
}

}  // namespace

TEST(Launch, KilledRankStopsTheJobNamingIt) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path out = tmp("kill");
  Result r = launch("SPORE_FAULT_INJECT=1:5:kill", kArgs + "--epochs 3 --out " + out.string());
  std::printf("exit %d after %.1f s:\n%s\n", r.code, r.seconds, r.out.c_str());
  EXPECT_NE(r.code, 0);
  EXPECT_LT(r.seconds, 60);
  // mpirun notices the dead process itself ("process rank 1 ... exited on signal 9"); the
  // survivors' deadline would name it too when the runtime does not.
  EXPECT_TRUE(r.out.find("rank 1") != std::string::npos) << r.out;
  fs::remove_all(out);
}

TEST(Launch, HungRankIsReportedAfterTheDeadline) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path out = tmp("stop");
  expect_lost_rank_named(
      launch("SPORE_FAULT_INJECT=1:5:stop", kArgs + "--epochs 3 --out " + out.string()),
      "data parallel");
  fs::remove_all(out);
}

TEST(Launch, ResumeAfterFaultReproducesTheUninterruptedRun) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path full = tmp("full"), faulty = tmp("faulty");
  Result a = launch("", kArgs + "--epochs 3 --out " + full.string());
  ASSERT_EQ(a.code, 0) << a.out;
  // Rank 1 dies in epoch 2 (global step 12); the epoch-1 checkpoint was written before.
  Result b = launch("SPORE_FAULT_INJECT=1:12:kill", kArgs + "--epochs 3 --out " + faulty.string());
  ASSERT_NE(b.code, 0) << b.out;
  const fs::path ck = faulty / "checkpoints" / "lenet-1_8.safetensors";
  ASSERT_TRUE(fs::exists(ck)) << b.out;
  Result c = launch("", kArgs + "--epochs 3 --out " + faulty.string() + " --resume " + ck.string());
  ASSERT_EQ(c.code, 0) << c.out;
  std::printf("resumed run:\n%s\n", c.out.c_str());
  io::Checkpoint x = io::load_checkpoint((full / "lenet.safetensors").string());
  io::Checkpoint y = io::load_checkpoint((faulty / "lenet.safetensors").string());
  ASSERT_EQ(x.tensors.size(), y.tensors.size());
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    const auto u = x.tensors[i].second.to(kFloat64).contiguous().to_vector<double>();
    const auto v = y.find(x.tensors[i].first)->to(kFloat64).contiguous().to_vector<double>();
    ASSERT_EQ(u.size(), v.size());
    double worst = 0;
    for (size_t k = 0; k < u.size(); ++k) worst = std::max(worst, std::abs(u[k] - v[k]));
    EXPECT_LE(worst, 1e-6) << x.tensors[i].first;
  }
  fs::remove_all(full);
  fs::remove_all(faulty);
}

// `--parallel-optimizer` (ZeRO-1) and `--grad-accum` through the CLI: the same weights as plain
// data parallel on the same global batches (accumulation: 2 batches of 32 = one update on 64).
TEST(Launch, ParallelOptimizerAndGradAccumulationMatchPlainDataParallel) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path plain = tmp("plain"), zero = tmp("zero"), accum = tmp("accum");
  Result a = launch("", kArgs + "--epochs 2 --out " + plain.string());
  ASSERT_EQ(a.code, 0) << a.out;
  Result b = launch("", kArgs + "--epochs 2 --parallel-optimizer --out " + zero.string());
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("each of the 2 ranks keeps 1/2 of the optimizer state"), std::string::npos)
      << b.out;
  // Shuffling draws the same order for --batch-size 32 x 2 accumulated as for 64 (one epoch order).
  Result c = launch(
      "",
      "--limit 512 --eval-limit 256 --batch-size 32 --comm-timeout 5 --seed 3 --grad-accum 2 "
      "--epochs 2 --out " +
          accum.string());
  ASSERT_EQ(c.code, 0) << c.out;
  for (const fs::path& other : {zero, accum})
    expect_same_weights(plain / "lenet.safetensors", other / "lenet.safetensors");
  for (const fs::path& d : {plain, zero, accum}) fs::remove_all(d);
}

// Operator-level sharding through the CLI: the transformer cut over 2 ranks (mp=2) ends with the
// same weights as one process; a rank that hangs mid-step is named by the survivor within the
// deadline (the collectives of a cut layer run in subgroups, and their errors name world ranks).
TEST(Launch, ShardedTransformerMatchesOneProcessAndNamesALostRank) {
  if (skip()) GTEST_SKIP() << "needs MPI and the spore CLI, outside mpirun";
  const fs::path one = tmp("tr_one"), two = tmp("tr_two"), lost = tmp("tr_lost");
  const std::string args = "--limit 512 --eval-limit 256 --epochs 1 --comm-timeout 5 --seed 3 ";
  ASSERT_TRUE(train_one_process("transformer", args + "--out " + one.string()));
  Result b = launch("", args + "--parallel mp=2 --out " + two.string(), "transformer");
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("2 ranks as dp=1 x mp=2"), std::string::npos) << b.out;
  expect_same_weights(one / "transformer.safetensors", two / "transformer.safetensors");
  // Its blocks as 2 pipeline stages, each rank holding one: the final file (gathered, under
  // TransformerClassifier's names) equals one process's.
  const fs::path pp = tmp("tr_pp");
  Result p = launch("", args + "--parallel pp=2 --out " + pp.string(), "transformer");
  ASSERT_EQ(p.code, 0) << p.out;
  EXPECT_NE(p.out.find("pipeline parallel: 2 stages"), std::string::npos) << p.out;
  expect_same_tensors_by_name(one / "transformer.safetensors", pp / "transformer.safetensors");
  fs::remove_all(pp);
  expect_lost_rank_named(launch("SPORE_FAULT_INJECT=1:3:stop",
                                args + "--parallel mp=2 --out " + lost.string(), "transformer"),
                         "semi_auto_parallel");
  for (const fs::path& d : {one, two, lost}) fs::remove_all(d);
}

// The other modes lose a rank the same way: a ZeRO-1 job (--parallel-optimizer) and a pipeline
// (PipelineTrainer, run through the test binary's LaunchChild.PipelineLostRank as a 2-rank job).
TEST(Launch, LostRankIsNamedWithOptimizerShardingAndInAPipeline) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path out = tmp("zero_lost");
  expect_lost_rank_named(launch("SPORE_FAULT_INJECT=1:5:stop",
                                kArgs + "--epochs 3 --parallel-optimizer --out " + out.string()),
                         "ZeRO-1");
  fs::remove_all(out);
  const std::string bin = std::string(SPORE_BINARY_DIR) + "/tests/test_parallel";
  expect_lost_rank_named(
      shell(kCleanEnv + "SPORE_PIPELINE_FAULT=1 SPORE_COMM_TIMEOUT=5 " + kSpore +
            " launch -n 2 -- " + bin + " --gtest_filter=LaunchChild.PipelineLostRank"),
      "pipeline");
}

// Pipeline stages and sharded convolutions from the CLI: lenet cut into 2 stages (--parallel pp=2)
// and lenet's layers cut over 2 ranks (--parallel mp=2) end with the weights of one process.
TEST(Launch, PipelineStagesAndShardedLeNetMatchOneProcess) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path one = tmp("pp_one"), pp = tmp("pp_two"), mp = tmp("mp_two");
  const std::string args = "--limit 512 --eval-limit 256 --epochs 1 --comm-timeout 5 --seed 3 ";
  ASSERT_TRUE(train_one_process("lenet", args + "--out " + one.string()));
  Result b = launch("", args + "--parallel pp=2 --out " + pp.string());
  ASSERT_EQ(b.code, 0) << b.out;
  EXPECT_NE(b.out.find("pipeline parallel: 2 stages x 1 replicas"), std::string::npos) << b.out;
  expect_same_weights(one / "lenet.safetensors", pp / "lenet.safetensors");
  // Each rank wrote its stage; merged, they are one process's checkpoint (weights and moments).
  EXPECT_TRUE(fs::exists(pp / "checkpoints" / "rank_1" / "latest"));
  const fs::path merged = pp / "merged.safetensors";
  const Result m =
      shell(kSpore + " convert --merge " + (pp / "checkpoints").string() + " " + merged.string());
  ASSERT_EQ(m.code, 0) << m.out;
  expect_same_tensors_by_name(one / "checkpoints" / "lenet-1_8.safetensors", merged);
  Result c = launch("", args + "--parallel mp=2 --out " + mp.string());
  ASSERT_EQ(c.code, 0) << c.out;
  EXPECT_NE(c.out.find("semi_auto_parallel: 2 ranks as dp=1 x mp=2"), std::string::npos) << c.out;
  expect_same_weights(one / "lenet.safetensors", mp / "lenet.safetensors");
  EXPECT_TRUE(fs::exists(mp / "checkpoints" / "rank_1"));  // each rank's pieces
  for (const fs::path& d : {one, pp, mp}) fs::remove_all(d);
}

// dp x mp x pp through the CLI on 4 ranks: lenet in 2 pipeline stages whose layers are cut over
// the stage's 2 ranks, with ZeRO-1: one process's weights. Every rank's checkpoint holds pieces and
// a range of their optimizer state; `spore convert --merge` puts them together into one process's
// checkpoint (weights and moments). The same for dp 2 x mp 2 with ZeRO-1 (each piece's state cut
// over its 2 replicas).
TEST(Launch, PipelineStagesCutOverTheirRanksMatchOneProcess) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  const fs::path one = tmp("ppmp_one"), ppmp = tmp("ppmp_four");
  const std::string args = "--limit 512 --eval-limit 256 --epochs 1 --comm-timeout 20 --seed 3 ";
  ASSERT_TRUE(train_one_process("lenet", args + "--out " + one.string()));
  const Result r = shell(kCleanEnv + " " + kSpore + " launch -n 4 -- spore train lenet " + args +
                         "--parallel pp=2,mp=2 --parallel-optimizer --out " + ppmp.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("pipeline x semi_auto_parallel: 2 stages, each cut over dp=1 x mp=2"),
            std::string::npos)
      << r.out;
  expect_same_weights(one / "lenet.safetensors", ppmp / "lenet.safetensors");
  const fs::path one_ck = one / "checkpoints" / "lenet-1_8.safetensors";
  const Result m = shell(kSpore + " convert --merge " + (ppmp / "checkpoints").string() + " " +
                         (ppmp / "merged.safetensors").string());
  ASSERT_EQ(m.code, 0) << m.out;
  EXPECT_NE(m.out.find("merged 4 rank checkpoints"), std::string::npos) << m.out;
  expect_same_tensors_by_name(one_ck, ppmp / "merged.safetensors");
  // A merged pipeline file still splits into its stages.
  const Result sp = shell(kSpore + " convert --split " + (ppmp / "merged.safetensors").string() +
                          " " + (ppmp / "split").string());
  ASSERT_EQ(sp.code, 0) << sp.out;
  EXPECT_TRUE(fs::exists(ppmp / "split" / "rank_1" / "merged.safetensors"));

  const fs::path dpmp = tmp("dpmp_four");
  const Result d = shell(kCleanEnv + " " + kSpore + " launch -n 4 -- spore train lenet " + args +
                         "--parallel dp=2,mp=2 --parallel-optimizer --out " + dpmp.string());
  ASSERT_EQ(d.code, 0) << d.out;
  expect_same_weights(one / "lenet.safetensors", dpmp / "lenet.safetensors");
  const io::Checkpoint r1 =
      io::load_checkpoint((dpmp / "checkpoints" / "rank_1" / "lenet-1_8.safetensors").string());
  EXPECT_EQ(r1.metadata.count("optimizer_shard"),
            1u);  // rank 1 holds pieces and part of their state
  const Result dm = shell(kSpore + " convert --merge " +
                          (dpmp / "checkpoints" / "rank_1" / "lenet-1_8.safetensors").string() +
                          " " + (dpmp / "merged.safetensors").string());
  ASSERT_EQ(dm.code, 0) << dm.out;
  expect_same_tensors_by_name(one_ck, dpmp / "merged.safetensors");
  // Without rank 3's file the set is incomplete, and the merge says which rank is missing.
  fs::remove_all(dpmp / "checkpoints" / "rank_3");
  const Result miss = shell(kSpore + " convert --merge " + (dpmp / "checkpoints").string() + " " +
                            (dpmp / "m2.safetensors").string());
  EXPECT_NE(miss.code, 0);
  EXPECT_NE(miss.out.find("no file of rank 3"), std::string::npos) << miss.out;
  for (const fs::path& d : {one, ppmp, dpmp}) fs::remove_all(d);
}

namespace {
// The largest difference over the largest magnitude, per tensor, between two checkpoints holding
// the same names (in any order).
double max_relative_difference(const fs::path& a, const fs::path& b) {
  const io::Checkpoint pa = io::load_checkpoint(a.string()), pb = io::load_checkpoint(b.string());
  EXPECT_EQ(pa.tensors.size(), pb.tensors.size()) << a << " " << b;
  double worst = 0;
  for (const auto& [name, t] : pa.tensors) {
    const Tensor* o = pb.find(name);
    if (o == nullptr) {
      ADD_FAILURE() << b << " has no " << name;
      return 1;
    }
    const auto u = t.to(kFloat64).contiguous().to_vector<double>();
    const auto v = o->to(kFloat64).contiguous().to_vector<double>();
    if (u.size() != v.size()) {
      ADD_FAILURE() << name << ": " << u.size() << " against " << v.size() << " values";
      return 1;
    }
    double diff = 0, mag = 0;
    for (size_t k = 0; k < u.size(); ++k)
      diff = std::max(diff, std::abs(u[k] - v[k])), mag = std::max(mag, std::abs(u[k]));
    worst = std::max(worst, diff / std::max(mag, 1e-30));
  }
  return worst;
}
}  // namespace

// Resuming a run whose checkpoints are per rank: lenet cut into 2 pipeline stages (--resume auto:
// each rank reads its rank_<r>/latest), lenet's layers sharded over 2 ranks (--resume with rank
// 0's file: each rank reads the same name from its own rank_<r>/), and data parallel with the
// optimizer state sharded (ZeRO-1, --resume auto). One epoch, then a resumed second, ends with the
// weights and optimizer state of an uninterrupted two-epoch run.
TEST(Launch, PipelinedAndShardedRunsResumeToTheUninterruptedWeights) {
  if (skip()) GTEST_SKIP() << "needs MPI, the spore CLI and Fashion-MNIST, outside mpirun";
  for (const std::string mode : {"--parallel pp=2", "--parallel mp=2", "--parallel-optimizer"}) {
    SCOPED_TRACE(mode);
    const fs::path full = tmp("resume_full"), part = tmp("resume_part");
    const std::string args = kArgs + mode + " ";
    Result a = launch("", args + "--epochs 2 --out " + full.string());
    ASSERT_EQ(a.code, 0) << a.out;
    Result b = launch("", args + "--epochs 1 --out " + part.string());
    ASSERT_EQ(b.code, 0) << b.out;
    const std::string from =
        mode != "--parallel mp=2"
            ? std::string("auto")
            : (part / "checkpoints" / "rank_0" / "lenet-1_8.safetensors").string();
    Result c = launch("", args + "--epochs 2 --out " + part.string() + " --resume " + from);
    ASSERT_EQ(c.code, 0) << c.out;
    if (from == "auto")
      EXPECT_NE(c.out.find("continuing from " + (part / "checkpoints" / "rank_0").string()),
                std::string::npos)
          << c.out;
    const double whole =
        max_relative_difference(full / "lenet.safetensors", part / "lenet.safetensors");
    double per_rank = 0;  // each rank's stage, pieces or optimizer shard, with the moments
    for (const char* r : {"rank_0", "rank_1"})
      per_rank = std::max(
          per_rank, max_relative_difference(full / "checkpoints" / r / "lenet-2_8.safetensors",
                                            part / "checkpoints" / r / "lenet_1-2_8.safetensors"));
    std::printf("%s resumed against uninterrupted: weights %.3g, per-rank checkpoints %.3g\n",
                mode.c_str(), whole, per_rank);
    // float32 rounding: a restarted process may sum in another order (PyNative pipelines: 0)
    EXPECT_LE(whole, 1e-6);
    EXPECT_LE(per_rank, 1e-6);
    if (mode == "--parallel pp=2") {
      // The per-rank checkpoints cannot resume a run that keeps whole ones, or another mesh.
      Result d = launch("", kArgs + "--epochs 3 --out " + part.string() + " --resume auto");
      EXPECT_NE(d.code, 0);
      EXPECT_NE(d.out.find("holds per-rank checkpoints"), std::string::npos) << d.out;
      Result e = launch(
          "", kArgs + "--parallel mp=2 --epochs 3 --out " + part.string() + " --resume auto");
      EXPECT_NE(e.code, 0);
      EXPECT_NE(e.out.find("was written by another layout of ranks"), std::string::npos) << e.out;
    }
    fs::remove_all(full);
    fs::remove_all(part);
  }
}
