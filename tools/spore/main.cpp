// `spore`: the command line (CLI11). Subcommands: train, eval, run-check. Every spore::Error ends
// as one clear line on stderr and exit code 1; bad flags get CLI11's message and exit code 2.
#include <CLI/CLI.hpp>
#include <iostream>

#include "jobs.h"
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
                                          "mlp-regression (generated Friedman #1 data)")
      ->check(CLI::IsMember({"lenet", "mlp", "mlp-regression", "resnet18"}))
      ->default_val("lenet");
  train_cmd->add_option("--epochs", t.epochs, "training epochs")->default_val(t.epochs)->check(kPositive);
  train_cmd->add_option("--batch-size", t.batch_size, "samples per step")->default_val(t.batch_size)->check(kPositive);
  train_cmd->add_option("--lr", t.lr, "learning rate")->default_val(t.lr)->check(kPositive);
  train_cmd->add_option("--momentum", t.momentum, "momentum of the Momentum optimizer")->default_val(t.momentum);
  train_cmd->add_option("--mode", t.mode, "execution mode")->check(CLI::IsMember({"graph", "pynative"}))->default_val(t.mode);
  train_cmd->add_option("--data", t.data, "folder with the IDX files (train-images-idx3-ubyte[.gz], ...)")->default_val(t.data);
  train_cmd->add_option("--out", t.out, "output folder (default out/<model>)");
  train_cmd->add_option("--seed", t.seed, "random seed (initialisation, shuffling)")->default_val(t.seed);
  train_cmd->add_option("--threads", t.threads, "threads (0: all cores)")->default_val(t.threads)->check(kNonNegative);
  train_cmd->add_option("--limit", t.limit, "use only the first N training samples")->check(kPositive);
  train_cmd->add_option("--eval-limit", t.eval_limit, "use only the first N test samples")->check(kPositive);
  train_cmd->add_flag("--verbose", t.verbose, "print the network, parameter counts and memory use");

  EvalArgs e;
  auto* eval_cmd = app.add_subcommand("eval", "evaluate a saved checkpoint on the test set");
  eval_cmd->add_option("model", e.model, "lenet | mlp")->check(CLI::IsMember({"lenet", "mlp"}))->default_val("lenet");
  eval_cmd->add_option("--ckpt", e.ckpt, "checkpoint file (.safetensors) written by `spore train`")->required();
  eval_cmd->add_option("--data", e.data, "folder with the IDX files")->default_val(e.data);
  eval_cmd->add_option("--batch-size", e.batch_size, "samples per step")->default_val(e.batch_size)->check(kPositive);
  eval_cmd->add_option("--limit", e.limit, "use only the first N test samples")->check(kPositive);

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
  } catch (const spore::Error& err) {
    std::cerr << "spore: " << spore::error_kind_name(err.kind()) << ": " << err.what() << "\n";
    return 1;
  } catch (const std::exception& err) {
    std::cerr << "spore: error: " << err.what() << "\n";
    return 1;
  }
  return 0;
}
