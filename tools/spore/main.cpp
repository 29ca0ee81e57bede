// `spore`: the command line (CLI11). Subcommands: train, eval, run-check, launch. Every spore::Error ends
// as one clear line on stderr and exit code 1; bad flags get CLI11's message and exit code 2.
#include <CLI/CLI.hpp>
#include <iostream>

#include "jobs.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"

namespace {
// "--epochs: expected a positive number, got 'zero'" (CLI11's own range message prints 1.8e308).
CLI::Validator number_check(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& s) -> std::string {
        try {
          size_t pos = 0;
          const double v = std::stod(s, &pos);
          if (pos == s.size() && (v > 0 || (allow_zero && v == 0))) return "";
        } catch (const std::exception&) {
        }
        return std::string("expected a ") + (allow_zero ? "non-negative" : "positive") + " number, got '" + s + "'";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}
const CLI::Validator kPositive = number_check(false), kNonNegative = number_check(true);

// Under spore launch / mpirun: " (rank 1)" in error lines, and an error on one rank stops them all
// (the others would otherwise wait for it until the communication deadline).
std::string rank_tag() {
  const auto [rank, size] = spore::parallel::launcher_rank_size();
  return size > 1 ? " (rank " + std::to_string(rank) + ")" : "";
}
void stop_all_ranks() {
  std::cerr.flush();
  if (spore::parallel::launcher_rank_size().second > 1 && spore::parallel::is_initialized()) spore::parallel::abort(1);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace spore::cli;
  CLI::App app{"Spore: a C++ deep-learning framework with MindSpore's API.\n"
               "Examples:\n  spore train lenet                 train LeNet-5 on Fashion-MNIST\n"
               "  spore eval lenet --ckpt out/lenet/lenet.safetensors\n  spore run-check"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("spore ") + SPORE_VERSION);

  TrainArgs t;
  auto* train_cmd = app.add_subcommand("train", "train a model from the zoo and save its checkpoint, "
                                                "metrics and training curves");
  train_cmd->add_option("model", t.model, "lenet (Fashion-MNIST), mlp (Fashion-MNIST), "
                                          "mlp-regression (generated Friedman #1 data), resnet18 (CIFAR-10 in --data DIR)")
      ->check(CLI::IsMember({"lenet", "mlp", "mlp-regression", "resnet18"}))
      ->default_val("lenet");
  train_cmd->add_option("--epochs", t.epochs, "training epochs")->default_val(t.epochs)->check(kPositive);
  train_cmd->add_option("--batch-size", t.batch_size, "samples per step")->default_val(t.batch_size)->check(kPositive);
  train_cmd->add_option("--lr", t.lr, "learning rate")->default_val(t.lr)->check(kPositive);
  train_cmd->add_option("--momentum", t.momentum, "momentum of the Momentum optimizer")->default_val(t.momentum);
  train_cmd->add_option("--mode", t.mode, "execution mode: graph (the training step traced and compiled "
                                        "once, then run as one optimised graph) or pynative (op by op, eager)")->check(CLI::IsMember({"graph", "pynative"}))->default_val(t.mode);
  train_cmd->add_option("--data", t.data, "folder with the IDX files (train-images-idx3-ubyte[.gz], ...)")->default_val(t.data);
  train_cmd->add_option("--out", t.out, "output folder (default out/<model>)");
  train_cmd->add_option("--seed", t.seed, "random seed (initialisation, shuffling)")->default_val(t.seed);
  train_cmd->add_option("--threads", t.threads, "threads (0: all cores)")->default_val(t.threads)->check(kNonNegative);
  train_cmd->add_option("--limit", t.limit, "use only the first N training samples")->check(kPositive);
  train_cmd->add_option("--eval-limit", t.eval_limit, "use only the first N test samples")->check(kPositive);
  train_cmd->add_flag("--verbose", t.verbose, "print the network, parameter counts, memory use and (graph mode) the compiled "
                                            "step's node counts, planned peak memory and cache statistics");
  train_cmd->add_option("--resume", t.resume, "continue from a checkpoint written at an epoch end "
                                              "(out/<model>/checkpoints/<model>-<epoch>_<step>.safetensors)");
  train_cmd->add_option("--amp", t.amp, "mixed precision level: O0 (float32), O1 (conv/matmul/relu in low "
                                        "precision), O2 (all but BatchNorm, dynamic loss scaling), O3 (all)")->default_val(t.amp);
  train_cmd->add_option("--profile", t.profile, "record a profile into this folder: trace.json (Chrome trace "
                        "events: open in ui.perfetto.dev or chrome://tracing) and summary.txt (top ops)");
  train_cmd->add_option("--dump-ir", t.dump_ir, "Graph mode: write the compiled step's IR after every pass "
                        "(<graph>.<NN>.<pass>.txt) and the final graph as Graphviz .dot into this folder");
  train_cmd->add_option("--amp-dtype", t.amp_dtype, "low-precision dtype for --amp: fp16 | bf16")->default_val(t.amp_dtype);
  train_cmd->add_option("--comm-timeout", t.comm_timeout, "under spore launch / mpirun: seconds before a "
                                                          "silent rank counts as lost")->default_val(t.comm_timeout)->check(kPositive);

  LaunchArgs l;
  auto* launch_cmd = app.add_subcommand("launch", "run a command as N MPI ranks (data-parallel training): "
                                                  "spore launch -n 2 -- spore train lenet");
  launch_cmd->add_option("-n,--np", l.n, "number of ranks (processes)")->default_val(l.n)->check(kPositive);
  launch_cmd->add_option("--hostfile", l.hostfile, "OpenMPI hostfile (one 'host slots=K' per line) for several hosts");
  launch_cmd->add_flag("--all-ranks-print", l.all_ranks_print, "every rank prints its progress (default: rank 0 only)");
  launch_cmd->add_option("--comm-timeout", l.comm_timeout, "seconds before a silent rank counts as lost (default 60)")->check(kPositive);
  launch_cmd->add_option("command", l.command, "the command after --, e.g. -- spore train lenet")->required();

  EvalArgs e;
  auto* eval_cmd = app.add_subcommand("eval", "evaluate a saved checkpoint on the test set");
  eval_cmd->add_option("model", e.model, "lenet | mlp | resnet18")->check(CLI::IsMember({"lenet", "mlp", "resnet18"}))->default_val("lenet");
  eval_cmd->add_option("--ckpt", e.ckpt, "checkpoint file (.safetensors) written by `spore train`")->required();
  eval_cmd->add_option("--data", e.data, "folder with the IDX files")->default_val(e.data);
  eval_cmd->add_option("--batch-size", e.batch_size, "samples per step")->default_val(e.batch_size)->check(kPositive);
  eval_cmd->add_option("--limit", e.limit, "use only the first N test samples")->check(kPositive);

  DashboardArgs d;
  auto* dash_cmd = app.add_subcommand("dashboard", "serve a training run's curves, hyper-parameters, checkpoints "
                                                   "and profiler summary as a web page (updates while it trains)");
  dash_cmd->add_option("run_dir", d.run_dir, "the --out folder of a `spore train` run, e.g. out/lenet")->required();
  dash_cmd->add_option("--port", d.port, "TCP port")->default_val(d.port)->check(CLI::Range(1, 65535));
  dash_cmd->add_option("--host", d.host, "address to listen on (127.0.0.1: this machine only)")->default_val(d.host);

  auto* check_cmd = app.add_subcommand("run-check", "print the build (version, backends, libraries, "
                                                    "CPU features) and run one tiny training step");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err);
  }
  try {
    if (*train_cmd) return train(t);
    if (*eval_cmd) return eval(e);
    if (*check_cmd) return run_check();
    if (*launch_cmd) return launch(l);
    if (*dash_cmd) return dashboard(d);
  } catch (const spore::Error& err) {
    std::cerr << "spore" << rank_tag() << ": " << spore::error_kind_name(err.kind()) << ": " << err.what() << "\n";
    stop_all_ranks();
    return 1;
  } catch (const std::exception& err) {
    std::cerr << "spore" << rank_tag() << ": error: " << err.what() << "\n";
    stop_all_ranks();
    return 1;
  }
  return 0;
}
