// End-to-end faults a user hits with `spore train` / `spore eval` (docs/hardening.md):
//  - kill -9 at random moments during checkpoint saves (20 tries) never leaves a file under a final
//    name that fails to load, and --resume from the newest checkpoint continues at the right epoch;
//  - a full disk (a small tmpfs) or a file-size limit (RLIMIT_FSIZE, `ulimit -f`) during a save is
//    a clear error, with the previous checkpoints intact and no temp file left;
//  - a read-only, unusable or non-folder --out is a clear error before training starts;
//  - every numeric flag rejects negative, zero (where not allowed), non-numeric, NaN and huge
//  values
//    with one line naming the flag and the accepted range;
//  - --device: CPU runs, a target this build lacks is set_device's "Unsupported device target";
//  - `spore eval` takes an epoch checkpoint (optimizer state skipped and reported; --strict-load
//    refuses it).
// Runs are short (256 training images, batch 64: 4 steps an epoch) and seeded; loops are bounded.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "backends/backend.h"
#include "e2e/cli_run.h"
#include "spore/io/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using spore::e2e::kSpore;
using spore::e2e::Result;
using spore::e2e::run;
const std::string kData = "/usr/share/datasets/fashion-mnist";
// 4 steps an epoch, a 64-image evaluation: about a second an epoch.
const std::string kQuick =
    " --limit 256 --eval-limit 64 --batch-size 64 --mode pynative --threads 2 ";

fs::path temp_dir(const std::string& name) { return spore::e2e::temp_dir("spore_faults_", name); }

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Starts `spore <argv...>` with stdout/stderr to log; fsize_limit > 0 sets RLIMIT_FSIZE (bytes).
pid_t spawn(const std::vector<std::string>& args, const fs::path& log, rlim_t fsize_limit = 0) {
  const pid_t pid = fork();
  if (pid != 0) return pid;
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 1);
  dup2(fd, 2);
  if (fsize_limit > 0) {
    const rlimit rl{fsize_limit, fsize_limit};
    setrlimit(RLIMIT_FSIZE, &rl);
  }
  setenv("OMP_NUM_THREADS", "2", 1);
  std::vector<char*> argv{const_cast<char*>(kSpore.c_str())};
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv(kSpore.c_str(), argv.data());
  _exit(127);
}

int wait_exit(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::vector<std::string> split_args(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> v;
  for (std::string w; in >> w;) v.push_back(w);
  return v;
}

bool is_temp(const fs::path& p) { return p.filename().string().find(".tmp.") != std::string::npos; }

// Checkpoint files under final names in dir, and temp files.
struct Listing {
  std::vector<fs::path> final_files, temp_files;
};
Listing list(const fs::path& dir) {
  Listing l;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (is_temp(e.path()))
      l.temp_files.push_back(e.path());
    else if (e.path().extension() == ".safetensors")
      l.final_files.push_back(e.path());
  }
  std::sort(l.final_files.begin(), l.final_files.end());
  return l;
}

// The "epoch" metadata of a checkpoint (-1 when want_epoch is false, or with a test failure when it
// does not load). The final model file (<out>/lenet.safetensors) carries no epoch: it is the net
// only.
int64_t checked_epoch(const fs::path& f, bool want_epoch = true) {
  try {
    const spore::io::Checkpoint ck = spore::io::load_checkpoint(f.string());
    EXPECT_FALSE(ck.tensors.empty()) << f;
    if (!want_epoch) return -1;
    auto it = ck.metadata.find("epoch");
    EXPECT_NE(it, ck.metadata.end()) << f;
    return it == ck.metadata.end() ? -1 : std::stoll(it->second);
  } catch (const std::exception& e) {
    ADD_FAILURE() << f << " is under a final name but does not load: " << e.what();
    return -1;
  }
}

// One line on stderr/stdout, naming `what`, with no C++ noise.
void expect_one_clean_line(const Result& r, const std::string& what) {
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 1) << r.out;
  EXPECT_NE(r.out.find(what), std::string::npos) << r.out;
  for (const char* noise :
       {"std::", "terminate", "what()", "Aborted", "exception", "filesystem error"})
    EXPECT_EQ(r.out.find(noise), std::string::npos) << noise << " in: " << r.out;
}

TEST(Faults, KillDuringCheckpointSavesNeverLeavesABadFileAndResumeContinues) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  std::mt19937 rng(18);  // the kill schedule is the same every run
  constexpr int kTries = 20, kEpochs = 3;
  int mid_save = 0, resumed = 0, finished = 0;
  for (int t = 0; t < kTries; ++t) {
    SCOPED_TRACE("try " + std::to_string(t));
    const fs::path out = temp_dir("kill" + std::to_string(t)), ck = out / "checkpoints";
    fs::create_directories(ck);
    const int ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    ASSERT_GE(ifd, 0);
    ASSERT_GE(inotify_add_watch(ifd, ck.c_str(), IN_CREATE), 0);
    const int kill_at_save = 1 + int(rng() % kEpochs);           // during the k-th save
    const auto delay = std::chrono::microseconds(rng() % 4000);  // 0-4 ms into it
    const pid_t pid = spawn(split_args("train lenet --epochs " + std::to_string(kEpochs) + kQuick +
                                       "--out " + out.string()),
                            out / "log.txt");
    int saves = 0;
    bool exited = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (saves < kill_at_save && std::chrono::steady_clock::now() < deadline) {
      pollfd pfd{ifd, POLLIN, 0};
      if (poll(&pfd, 1, 20) > 0) {
        alignas(inotify_event) char buf[4096];
        const ssize_t n = read(ifd, buf, sizeof buf);
        for (ssize_t i = 0; i < n;) {
          const auto* ev = reinterpret_cast<const inotify_event*>(buf + i);
          // A checkpoint's temp file; "latest.tmp.<pid>" (the pointer's) is not a save.
          if (ev->len && std::string(ev->name).find(".safetensors.tmp.") != std::string::npos)
            ++saves;
          i += ssize_t(sizeof(inotify_event) + ev->len);
        }
      }
      int status;
      if (waitpid(pid, &status, WNOHANG) == pid) {
        exited = true;
        break;
      }
    }
    close(ifd);
    if (!exited) {
      std::this_thread::sleep_for(delay);
      kill(pid, SIGKILL);
      wait_exit(pid);
    } else {
      ++finished;
    }
    const Listing l = list(ck);
    if (!l.temp_files.empty()) ++mid_save;
    int64_t newest = 0;
    fs::path newest_file;
    for (const fs::path& f : l.final_files) {
      const int64_t e = checked_epoch(f);
      if (e > newest) newest = e, newest_file = f;
    }
    if (fs::exists(out / "lenet.safetensors"))
      checked_epoch(out / "lenet.safetensors", /*want_epoch=*/false);
    if (newest_file.empty() || newest >= kEpochs) {
      fs::remove_all(out);
      continue;
    }
    // Resume from the newest checkpoint for one more epoch: it must start at epoch newest + 1.
    const std::string next = std::to_string(newest + 1);
    Result r = run("train lenet --epochs " + next + kQuick + "--out " + out.string() +
                   " --resume " + newest_file.string());
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("epoch " + next + "/" + next + ": train loss"), std::string::npos)
        << r.out;
    for (int64_t e = 1; e <= newest; ++e)
      EXPECT_EQ(r.out.find("epoch " + std::to_string(e) + "/"), std::string::npos) << r.out;
    EXPECT_TRUE(list(ck).temp_files.empty())
        << "the resumed run removes the killed run's temp files";
    ++resumed;
    fs::remove_all(out);
  }
  std::printf(
      "kill -9 during saves: %d tries, %d left a temp file (killed mid-save), %d resumed, %d "
      "finished "
      "before the kill\n",
      kTries, mid_save, resumed, finished);
  EXPECT_GT(resumed, 0);
}

// Trains one epoch into out; returns the epoch checkpoint.
fs::path train_one_epoch(const fs::path& out) {
  Result r = run("train lenet --epochs 1" + kQuick + "--out " + out.string());
  EXPECT_EQ(r.code, 0) << r.out;
  const Listing l = list(out / "checkpoints");
  EXPECT_EQ(l.final_files.size(), 1u) << r.out;
  return l.final_files.empty() ? fs::path() : l.final_files[0];
}

TEST(Faults, FileSizeLimitDuringASaveIsAClearErrorAndKeepsThePreviousCheckpoint) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("fsize");
  const fs::path first = train_one_epoch(out);
  ASSERT_FALSE(first.empty());
  const std::string before = read_file(first);
  ASSERT_GT(before.size(), 100000u);
  // `ulimit -f 64` (64 KiB): the metrics lines fit, the epoch-2 checkpoint does not.
  const pid_t pid = spawn(split_args("train lenet --epochs 2" + kQuick + "--out " + out.string() +
                                     " --resume " + first.string()),
                          out / "log.txt", 64 * 1024);
  const int code = wait_exit(pid);
  const Result r{code, read_file(out / "log.txt")};
  EXPECT_EQ(r.code, 1) << r.out;
  const std::string err = r.out.substr(r.out.rfind("spore: "));
  expect_one_clean_line({r.code, err}, "File too large");
  EXPECT_NE(err.find("file-size limit"), std::string::npos) << err;
  EXPECT_NE(err.find("nothing was written to"), std::string::npos) << err;
  const Listing l = list(out / "checkpoints");
  EXPECT_TRUE(l.temp_files.empty());
  ASSERT_EQ(l.final_files.size(), 1u);
  EXPECT_EQ(read_file(first), before) << "the previous checkpoint changed";
  EXPECT_EQ(checked_epoch(first), 1);
  fs::remove_all(out);
}

bool can_mount_tmpfs() {
  return std::system("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs /mnt' >/dev/null 2>&1") ==
         0;
}

TEST(Faults, FullDiskDuringASaveIsAClearErrorAndKeepsThePreviousCheckpoints) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  if (!can_mount_tmpfs())
    GTEST_SKIP() << "cannot mount a tmpfs here (needs unshare -m and mount rights)";
  const fs::path probe = temp_dir("fullprobe");
  const fs::path first = train_one_epoch(probe);
  ASSERT_FALSE(first.empty());
  const uintmax_t ckpt = fs::file_size(first);
  fs::remove_all(probe);
  // A tmpfs with room for two and a half checkpoints: epochs 1 and 2 save, epoch 3 runs out of
  // space.
  const fs::path dir = temp_dir("full"), mnt = dir / "mnt", copy = dir / "copy";
  fs::create_directories(mnt);
  const std::string size = std::to_string((ckpt * 5 / 2 + 4095) / 4096 * 4096);
  const std::string cmd = "unshare -m sh -c 'mount -t tmpfs -o size=" + size + " tmpfs " +
                          mnt.string() + " && OMP_NUM_THREADS=2 " + kSpore +
                          " train lenet --epochs 3" + kQuick + "--out " + mnt.string() + " > " +
                          (dir / "log.txt").string() + " 2>&1; rc=$?; cp -a " +
                          (mnt / "checkpoints").string() + " " + copy.string() + "; exit $rc'";
  const int status = std::system(cmd.c_str());
  const Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "log.txt")};
  EXPECT_EQ(r.code, 1) << r.out;
  ASSERT_NE(r.out.find("spore: "), std::string::npos) << r.out;
  const std::string err = r.out.substr(r.out.rfind("spore: "));
  expect_one_clean_line({r.code, err}, "No space left on device");
  EXPECT_NE(err.find("is full"), std::string::npos) << err;
  const Listing l = list(copy);
  EXPECT_TRUE(l.temp_files.empty()) << "the failed save left its temp file";
  ASSERT_EQ(l.final_files.size(), 2u) << r.out;
  EXPECT_EQ(checked_epoch(l.final_files[0]), 1);
  EXPECT_EQ(checked_epoch(l.final_files[1]), 2);
  fs::remove_all(dir);
}

TEST(Faults, UnusableOutIsAClearErrorBeforeTraining) {
  const fs::path dir = temp_dir("out");
  { std::ofstream(dir / "file") << "x"; }
  struct Case {
    std::string out, what;
  };
  std::vector<Case> cases = {
      {(dir / "file").string(), "exists and is not a folder"},
      {(dir / "file" / "sub").string(), "cannot create the folder"},
      {"/proc/spore_out", "cannot create the folder"},
  };
  if (geteuid() != 0) {  // root writes through permission bits
    fs::create_directories(dir / "ro");
    fs::permissions(dir / "ro", fs::perms::owner_read | fs::perms::owner_exec);
    cases.push_back({(dir / "ro").string(), "is not writable"});
  }
  for (const Case& c : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    Result r = run("train lenet --epochs 1" + kQuick + "--out " + c.out);
    EXPECT_EQ(r.code, 1) << r.out;
    expect_one_clean_line(r, "--out " + c.out);
    EXPECT_NE(r.out.find(c.what), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("pass --out with a folder you can write to"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("training lenet"), std::string::npos)
        << "the error came after training started";
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20));
  }
  if (can_mount_tmpfs()) {  // a read-only file system: refused even for root
    const fs::path ro = dir / "rofs";
    fs::create_directories(ro);
    const std::string cmd = "unshare -m sh -c 'mount -t tmpfs -o ro,size=64k tmpfs " + ro.string() +
                            " && OMP_NUM_THREADS=2 " + kSpore + " train lenet --epochs 1 --out " +
                            ro.string() + " > " + (dir / "log.txt").string() + " 2>&1'";
    const int status = std::system(cmd.c_str());
    const Result r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, read_file(dir / "log.txt")};
    EXPECT_EQ(r.code, 1) << r.out;
    expect_one_clean_line(r, "is not writable: Read-only file system");
  }
  if (fs::exists(dir / "ro"))
    fs::permissions(dir / "ro", fs::perms::owner_all, fs::perm_options::replace);
  fs::remove_all(dir);
}

TEST(Faults, BadNumericFlagValuesNameTheFlagAndTheRange) {
  struct Flag {
    std::string cmd, flag, range;
    std::vector<std::string> bad;
  };
  const std::vector<std::string> common = {"abc", "nan", "NaN", "inf", "-inf", "1e400", "", "3x"};
  const std::vector<Flag> flags = {
      {"train lenet",
       "--epochs",
       "[1, 1000000]",
       {"-1", "0", "1.5", "1e3", "1000001", "99999999999999999999"}},
      {"train lenet",
       "--batch-size",
       "[1, 65536]",
       {"-64", "0", "65537", "1e9", "18446744073709551616"}},
      {"train lenet", "--lr", "(0, 100]", {"-0.1", "0", "1e30", "100.5"}},
      {"train lenet", "--momentum", "[0, 1)", {"-0.5", "1", "2", "1e30"}},
      {"train lenet",
       "--seed",
       "[0, 18446744073709551615]",
       {"-1", "18446744073709551616", "1.5", "1e3"}},
      {"train lenet", "--threads", "[0, 1024]", {"-2", "1025", "100000000000", "0.5"}},
      {"train lenet", "--limit", "[1, 2147483647]", {"-5", "0", "2147483648", "1e12"}},
      {"train lenet", "--eval-limit", "[1, 2147483647]", {"-5", "0", "99999999999999999999"}},
      {"train lenet", "--comm-timeout", "(0, 86400]", {"-1", "0", "1e300", "86401"}},
      {"eval lenet --ckpt x.safetensors", "--batch-size", "[1, 65536]", {"-1", "0", "70000"}},
      {"eval lenet --ckpt x.safetensors", "--limit", "[1, 2147483647]", {"-1", "0", "3000000000"}},
      {"launch", "-n", "[1, 1024]", {"-1", "0", "5000"}},
      {"launch", "--comm-timeout", "(0, 86400]", {"-3", "0", "1e9"}},
  };
  for (const Flag& f : flags) {
    std::vector<std::string> values = f.bad;
    values.insert(values.end(), common.begin(), common.end());
    for (const std::string& v : values) {
      SCOPED_TRACE(f.cmd + " " + f.flag + " '" + v + "'");
      const std::string tail = f.cmd == "launch" ? " -- true" : "";
      Result r = run(f.cmd + " " + f.flag + " '" + v + "'" + tail);
      EXPECT_EQ(r.code, 2) << r.out;
      expect_one_clean_line(r, f.flag);
      EXPECT_NE(r.out.find(f.range), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("--help"), std::string::npos) << r.out;
    }
  }
}

TEST(Faults, UserErrorsAreOneLineWithWhatToDo) {
  const fs::path d = temp_dir("errs");
  { std::ofstream(d / "bad.safetensors") << "not a checkpoint"; }
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"train lenet --epochs 1 --data /nonexistent/dir --out " + (d / "o").string(),
       "dataset-fashion-mnist"},
      {"eval lenet --ckpt " + (d / "bad.safetensors").string(), "bad.safetensors"},
      {"eval lenet --ckpt " + (d / "missing.safetensors").string(), "missing.safetensors"},
      {"train alexnet", "alexnet"},
      {"train lenet --mode fast", "--mode"},
      {"train lenet --amp O9 --out " + (d / "o").string(), "O9"},
      {"eval lenet", "--ckpt"},
      {"train lenet --no-such-flag", "--no-such-flag"},
      {"train lenet --resume " + (d / "bad.safetensors").string() + " --out " + (d / "o").string(),
       "bad.safetensors"},
      {"", "a command is required"},
  };
  for (const auto& [args, what] : cases) {
    SCOPED_TRACE(args);
    Result r = run(args);
    EXPECT_TRUE(r.code == 1 || r.code == 2) << r.code << " " << r.out;
    expect_one_clean_line(r, what);
  }
  fs::remove_all(d);
}

TEST(Faults, DeviceTargets) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("device");
  Result r = run("train lenet --device CPU --epochs 1" + kQuick + "--out " + out.string());
  EXPECT_EQ(r.code, 0) << r.out;
  const std::vector<std::string> have = spore::available_device_targets();
  for (const std::string target : {std::string("GPU"), std::string("Ascend")}) {
    if (std::find(have.begin(), have.end(), target) != have.end()) continue;
    for (const std::string& cmd : std::vector<std::string>{
             "train lenet --epochs 1 --out " + out.string(), "eval lenet --ckpt nowhere"}) {
      r = run(cmd + " --device " + target);
      EXPECT_EQ(r.code, 1) << r.out;
      std::string list;
      for (const auto& h : have) list += (list.empty() ? "'" : ", '") + h + "'";
      expect_one_clean_line(
          r, "Unsupported device target " + target + ". This build supports [" + list + "]");
    }
  }
  r = run("train lenet --device TPU --out " + out.string());
  EXPECT_EQ(r.code, 1) << r.out;
  expect_one_clean_line(r, "Unsupported device target 'TPU'");
  fs::remove_all(out);
}

TEST(Faults, EvalTakesAnEpochCheckpointAndReportsTheSkippedTrainingState) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("evalck");
  const fs::path ck = train_one_epoch(out);
  ASSERT_FALSE(ck.empty());
  Result r = run("eval lenet --limit 64 --ckpt " + ck.string());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("entries the network does not have (moments.* ("), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("accuracy"), std::string::npos) << r.out;
  r = run("eval lenet --limit 64 --strict-load --ckpt " + ck.string());
  EXPECT_EQ(r.code, 1) << r.out;
  expect_one_clean_line(r, "unexpected (in the checkpoint, not in the net): moments.* (");
  EXPECT_NE(r.out.find("drop --strict-load"), std::string::npos) << r.out;
  // The final checkpoint (parameters only) loads strictly.
  r = run("eval lenet --limit 64 --strict-load --ckpt " + (out / "lenet.safetensors").string());
  EXPECT_EQ(r.code, 0) << r.out;
  fs::remove_all(out);
}

}  // namespace

namespace {
std::vector<fs::path> checkpoint_files(const fs::path& dir) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") out.push_back(e.path());
  return out;
}
bool same_tensors(const fs::path& a, const fs::path& b) {
  const spore::io::Checkpoint x = spore::io::load_checkpoint(a), y = spore::io::load_checkpoint(b);
  if (x.tensors.size() != y.tensors.size()) return false;
  for (size_t i = 0; i < x.tensors.size(); ++i) {
    const auto& [n, t] = x.tensors[i];
    if (n != y.tensors[i].first || t.to_vector<float>() != y.tensors[i].second.to_vector<float>())
      return false;
  }
  return true;
}
}  // namespace

// The weights of two processes are compared bit for bit: each would otherwise time the conv
// implementations at its first call (backends/cpu/kernels/conv_list.h) and, on a loaded machine,
// may keep another one, which sums in another order.
const std::string kFixedConvs = "SPORE_CONV_IMPL=onednn_blocked";

// Restarts into one --out (issue 33): the checkpoint family stays bounded however many runs wrote
// it, `latest` names the newest run's file, and --resume auto continues it exactly (the same
// weights as a run that was never interrupted).
TEST(Faults, RestartsIntoOneOutStayBoundedAndResumeAutoContinuesExactly) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("restarts"), straight = temp_dir("straight");
  const fs::path ck = out / "checkpoints";
  for (int i = 0; i < 5; ++i) {  // five runs of 2 epochs, each a fresh start into the same --out
    const Result r = run("train lenet --epochs 2" + kQuick + "--out " + out.string(), kFixedConvs);
    ASSERT_EQ(r.code, 0) << r.out;
  }
  EXPECT_LE(checkpoint_files(ck).size(), 3u) << "keep_checkpoint_max counts every run's files";
  std::string latest;
  std::getline(std::ifstream(ck / "latest"), latest);
  EXPECT_EQ(latest, "lenet_4-2_4.safetensors");
  Result r = run("train lenet --epochs 3" + kQuick + "--out " + out.string() + " --resume auto",
                 kFixedConvs);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("--resume auto: continuing from " + (ck / latest).string()),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("epoch 3/3: train loss"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("epoch 1/3"), std::string::npos) << r.out;
  // metrics.jsonl keeps every run's rows (5 x 2 epochs, then the resumed epoch 3), each tagged
  // with its run, the last one with the checkpoint it resumed from.
  {
    std::ifstream in(out / "metrics.jsonl");
    std::vector<std::string> rows, runs;
    for (std::string line; std::getline(in, line);) rows.push_back(line);
    ASSERT_EQ(rows.size(), 11u) << read_file(out / "metrics.jsonl");
    for (const std::string& row : rows) {
      const size_t at = row.find("\"run\":\"");
      ASSERT_NE(at, std::string::npos) << row;
      const std::string id = row.substr(at + 7, row.find('"', at + 7) - at - 7);
      if (std::find(runs.begin(), runs.end(), id) == runs.end()) runs.push_back(id);
    }
    EXPECT_EQ(runs.size(), 6u);
    EXPECT_NE(rows.back().find("\"epoch\":3,\"run\":\"" + runs.back() + "\",\"resumed_from\":\"" +
                               latest + "\""),
              std::string::npos)
        << rows.back();
  }
  r = run("train lenet --epochs 3" + kQuick + "--out " + straight.string(), kFixedConvs);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(same_tensors(out / "lenet.safetensors", straight / "lenet.safetensors"));
  // Nothing yet: auto starts from scratch, saying so.
  const fs::path fresh = temp_dir("fresh");
  r = run("train lenet --epochs 1" + kQuick + "--out " + fresh.string() + " --resume auto");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("no checkpoint in " + fresh.string()), std::string::npos) << r.out;
  for (const auto& d : {out, straight, fresh}) fs::remove_all(d);
}

// --amp O2 (float16, dynamic loss scale): the checkpoint carries the loss scale, and a resumed run
// continues it, ending with the same weights as an uninterrupted run; a checkpoint without it is
// refused unless --resume-partial.
TEST(Faults, ResumeUnderAmpContinuesTheLossScale) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("amp_resume"), straight = temp_dir("amp_straight");
  const std::string amp = " --amp O2 --amp-dtype fp16";
  // Untimed kernels, so both processes run the same ones (float16 convs through float32).
  const std::string convs = "SPORE_CONV_IMPL=onednn_blocked,onednn_via_f32";
  Result r = run("train lenet --epochs 1" + kQuick + amp + " --out " + out.string(), convs);
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path first = out / "checkpoints" / "lenet-1_4.safetensors";
  spore::io::Checkpoint ck = spore::io::load_checkpoint(first);
  ASSERT_TRUE(ck.metadata.count("loss_scale")) << "the checkpoint holds the loss scale";
  EXPECT_TRUE(ck.metadata.count("loss_scale_good_steps"));
  r = run("train lenet --epochs 2" + kQuick + amp + " --out " + out.string() + " --resume " +
              first.string(),
          convs);
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train lenet --epochs 2" + kQuick + amp + " --out " + straight.string(), convs);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(same_tensors(out / "lenet.safetensors", straight / "lenet.safetensors"));
  ck.metadata.erase("loss_scale");
  const fs::path old = out / "no_scale.safetensors";
  spore::io::save_checkpoint(ck.tensors, old.string(), ck.metadata);
  r = run("train lenet --epochs 2" + kQuick + amp + " --out " + (out / "a").string() +
              " --resume " + old.string(),
          convs);
  EXPECT_NE(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("holds no loss scale"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--resume-partial"), std::string::npos) << r.out;
  r = run("train lenet --epochs 2" + kQuick + amp + " --out " + (out / "b").string() +
              " --resume " + old.string() + " --resume-partial",
          convs);
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("holds no loss scale; it starts again at"), std::string::npos) << r.out;
  for (const auto& d : {out, straight}) fs::remove_all(d);
}

// A checkpoint that cannot restore the optimizer exactly (a moment missing, or stored as float64)
// is refused by --resume, naming the entries; --resume-partial restores the rest and lists them.
TEST(Faults, ResumeRefusesWhatItCannotRestoreUnlessPartial) {
  if (!fs::exists(kData)) GTEST_SKIP() << "dataset-fashion-mnist is not installed";
  const fs::path out = temp_dir("strict");
  Result r = run("train lenet --epochs 1" + kQuick + "--out " + out.string());
  ASSERT_EQ(r.code, 0) << r.out;
  const fs::path good = out / "checkpoints" / "lenet-1_4.safetensors";
  spore::io::Checkpoint ck = spore::io::load_checkpoint(good);
  auto moment = std::find_if(ck.tensors.begin(), ck.tensors.end(),
                             [](const auto& t) { return t.first.rfind("moments.", 0) == 0; });
  ASSERT_NE(moment, ck.tensors.end());
  const std::string name = moment->first;
  spore::io::NamedTensors missing = ck.tensors, widened = ck.tensors;
  missing.erase(missing.begin() + (moment - ck.tensors.begin()));
  widened[size_t(moment - ck.tensors.begin())].second = moment->second.to(spore::kFloat64);
  spore::io::save_checkpoint(missing, (out / "missing.safetensors").string(), ck.metadata);
  spore::io::save_checkpoint(widened, (out / "widened.safetensors").string(), ck.metadata);
  for (const char* f : {"missing", "widened"}) {
    const std::string file = (out / (std::string(f) + ".safetensors")).string();
    r = run("train lenet --epochs 2" + kQuick + "--out " + (out / f).string() + " --resume " +
            file);
    EXPECT_NE(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("cannot restore the run exactly"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("--resume-partial"), std::string::npos) << r.out;
    r = run("train lenet --epochs 2" + kQuick + "--out " + (out / f).string() + " --resume " +
            file + " --resume-partial");
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("these start from their initial values"), std::string::npos) << r.out;
  }
  fs::remove_all(out);
}
