// `spore launch`: N ranks of a command through mpiexec (OpenMPI), with the flags this build was
// configured with (SPORE_MPIEXEC_FLAGS in CMakeLists.txt: root in containers, oversubscription,
// shared memory + TCP). Also the pieces `spore train` needs when it runs as one of those ranks:
// MPI initialisation, the data-parallel context, who prints, and fault injection for the tests.
//   spore launch -n 2 -- spore train lenet --epochs 5
//   spore launch -n 4 --hostfile hosts.txt -- spore train lenet     (same path on every host)
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "jobs.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"

#ifndef SPORE_MPIEXEC
#define SPORE_MPIEXEC ""
#endif
#ifndef SPORE_MPIEXEC_FLAGS
#define SPORE_MPIEXEC_FLAGS ""
#endif

namespace spore::cli {

int launch(const LaunchArgs& a) {
  SPORE_CHECK(!a.command.empty(),
              "[spore launch] no command; usage: spore launch -n N -- spore train lenet ...");
  SPORE_CHECK(a.n >= 1, "[spore launch] -n must be >= 1, got ", a.n);
  std::string mpiexec = SPORE_MPIEXEC;
  if (mpiexec.empty()) mpiexec = "mpiexec";
  std::vector<std::string> args{mpiexec};
  std::istringstream flags(SPORE_MPIEXEC_FLAGS);
  for (std::string f; flags >> f;) args.push_back(f);
  args.insert(args.end(), {"-n", std::to_string(a.n)});
  if (!a.hostfile.empty()) {
    SPORE_CHECK(std::filesystem::exists(a.hostfile), "[spore launch] hostfile '", a.hostfile,
                "' does not exist");
    args.insert(args.end(), {"--hostfile", a.hostfile});
  }
  // Threads per rank: the cores divided among the ranks (on one host), unless the user chose.
  if (!std::getenv("OMP_NUM_THREADS")) {
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    setenv("OMP_NUM_THREADS", std::to_string(std::max(1u, cores / unsigned(a.n))).c_str(), 1);
  }
  args.insert(args.end(), {"-x", "OMP_NUM_THREADS"});
  if (a.all_ranks_print) {
    setenv("SPORE_ALL_RANKS_PRINT", "1", 1);
    args.insert(args.end(), {"-x", "SPORE_ALL_RANKS_PRINT", "--tag-output"});
  }
  if (a.comm_timeout >= 0) {
    setenv("SPORE_COMM_TIMEOUT", std::to_string(a.comm_timeout).c_str(), 1);
    args.insert(args.end(), {"-x", "SPORE_COMM_TIMEOUT"});
  }
  if (std::getenv("SPORE_FAULT_INJECT")) args.insert(args.end(), {"-x", "SPORE_FAULT_INJECT"});
  // `spore` means this very binary, so a build tree's CLI launches itself, not one on PATH.
  std::vector<std::string> cmd = a.command;
  if (cmd[0] == "spore") {
    std::error_code ec;
    const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (!ec) cmd[0] = self.string();
  }
  args.insert(args.end(), cmd.begin(), cmd.end());
  std::vector<char*> argv;
  for (std::string& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);
  std::fflush(stdout);
  execvp(argv[0], argv.data());
  SPORE_THROW(
      ErrorKind::RuntimeError, "[spore launch] could not run ", args[0], ": ", std::strerror(errno),
      "\nhint: install OpenMPI (apt-get install openmpi-bin libopenmpi-dev, or scripts/setup.sh)");
}

DistInfo setup_distributed(double comm_timeout) {
  DistInfo d;
  if (parallel::launcher_rank_size().second <= 1) return d;
  parallel::set_comm_timeout(std::getenv("SPORE_COMM_TIMEOUT") && comm_timeout == 60
                                 ? parallel::get_comm_timeout()
                                 : comm_timeout);
  parallel::init("mpi");
  d.rank = parallel::get_rank();
  d.size = parallel::get_group_size();
  parallel::AutoParallelContext ctx;
  ctx.parallel_mode = parallel::ParallelMode::DataParallel;
  ctx.gradients_mean = true;
  parallel::set_auto_parallel_context(ctx);
  const char* all = std::getenv("SPORE_ALL_RANKS_PRINT");
  d.print = d.rank == 0 || (all && std::strcmp(all, "0") != 0);
  return d;
}

std::function<void(int64_t)> fault_injector(int rank) {
  const char* spec = std::getenv("SPORE_FAULT_INJECT");
  if (!spec) return nullptr;
  int r = -1;
  long long step = -1;
  char what[16] = {0};
  SPORE_CHECK(std::sscanf(spec, "%d:%lld:%15s", &r, &step, what) == 3,
              "SPORE_FAULT_INJECT must be rank:step:kill|stop, got '", spec, "'");
  if (r != rank) return nullptr;
  const bool stop = std::strcmp(what, "stop") == 0;
  return [step, stop](int64_t global_step) {
    if (global_step != step) return;
    std::fprintf(stderr, "spore: fault injection: %s this rank at step %lld\n",
                 stop ? "stopping" : "killing", (long long)step);
    std::fflush(stderr);
    raise(stop ? SIGSTOP : SIGKILL);
  };
}

}  // namespace spore::cli
