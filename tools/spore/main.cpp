// `spore`: the command line (CLI11). Subcommands: train, eval, predict, coco-eval, data, run-check,
// launch, dashboard, convert, export, infer. Every error a user
// can cause ends as one line on stderr naming what was wrong, what was expected and what to do:
// a spore::Error with exit code 1, a bad flag or value (CLI11) with exit code 2.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <charconv>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <new>
#include <sstream>

#include "interop.h"
#include "jobs.h"
#include "spore/parallel/parallel.h"
#include "spore/spore.h"

namespace {
// Numeric flags take a value in a stated range, checked here before CLI11 converts it, so every
// bad value (negative, zero, not a number, NaN, infinite, huge) gets one line naming the flag, the
// accepted range and the value: "--epochs: expected an integer in [1, 1000000], got '-5'".
// CLI11 prefixes the flag; the failure message below adds what to do.
constexpr int64_t kMaxCount = 2147483647;  // --limit / --eval-limit: samples

// Integers in [lo, hi]: an optional '-' and digits only (no exponent, fraction or spaces).
bool parse_integer(const std::string& s, __int128* out) {
  const bool neg = !s.empty() && s[0] == '-';
  const char* b = s.data() + (neg ? 1 : 0);
  const char* e = s.data() + s.size();
  if (b == e) return false;
  uint64_t mag = 0;
  const auto [p, ec] = std::from_chars(b, e, mag);
  if (ec != std::errc() || p != e) return false;
  *out = neg ? -__int128(mag) : __int128(mag);
  return true;
}
std::string int128_str(__int128 v) {
  return v < 0 ? "-" + std::to_string(uint64_t(-v)) : std::to_string(uint64_t(v));
}
CLI::Validator integer_in(__int128 lo, __int128 hi) {
  const std::string range = "[" + int128_str(lo) + ", " + int128_str(hi) + "]";
  return CLI::Validator(
      [lo, hi, range](std::string& s) -> std::string {
        __int128 v = 0;
        if (!parse_integer(s, &v) || v < lo || v > hi)
          return "expected an integer in " + range + ", got '" + s + "'";
        s = int128_str(v);  // canonical: CLI11 would read "010" as octal
        return "";
      },
      "INT in " + range);
}
// Finite reals in [lo, hi], or (lo, hi] when lo_open; hi_open likewise.
CLI::Validator real_in(double lo, bool lo_open, double hi, bool hi_open) {
  auto num = [](double v) {
    std::ostringstream os;
    os << v;
    return os.str();
  };
  const std::string range =
      (lo_open ? "(" : "[") + num(lo) + ", " + num(hi) + (hi_open ? ")" : "]");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        double v = 0;
        const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const bool ok = !s.empty() && ec == std::errc() && p == s.data() + s.size() &&
                        std::isfinite(v) && (lo_open ? v > lo : v >= lo) &&
                        (hi_open ? v < hi : v <= hi);
        return ok ? "" : "expected a number in " + range + ", got '" + s + "'";
      },
      "NUMBER in " + range);
}
const CLI::Validator kEpochs = integer_in(1, 1000000), kBatch = integer_in(1, 65536),
                     kSamples = integer_in(1, kMaxCount), kThreads = integer_in(0, 1024),
                     kSeed = integer_in(0, __int128(UINT64_MAX)), kRanks = integer_in(1, 1024),
                     kLr = real_in(0, true, 100, false), kMomentum = real_in(0, false, 1, true),
                     kSeconds = real_in(0, true, 86400, false), kImg = integer_in(64, 4096),
                     kUnit = real_in(0, false, 1, false), kImages = integer_in(0, 10000000);

// Under spore launch / mpirun: " (rank 1)" in error lines, and an error on one rank stops them all
// (the others would otherwise wait for it until the communication deadline).
std::string rank_tag() {
  const auto [rank, size] = spore::parallel::launcher_rank_size();
  return size > 1 ? " (rank " + std::to_string(rank) + ")" : "";
}
// Errors print as one line: a message that lists several problems on separate lines is joined.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  for (size_t i; (i = s.find('\n')) != std::string::npos;) s.replace(i, 1, "; ");
  return s;
}
void stop_all_ranks() {
  std::cerr.flush();
  if (spore::parallel::launcher_rank_size().second > 1 && spore::parallel::is_initialized())
    spore::parallel::abort(1);
}
}  // namespace

int main(int argc, char** argv) {
  using namespace spore::cli;
  CLI::App app{
      "Spore: a C++ deep-learning framework with MindSpore's API.\n"
      "Examples:\n  spore train lenet                 train LeNet-5 on Fashion-MNIST\n"
      "  spore eval lenet --ckpt out/lenet/lenet.safetensors\n"
      "  spore data make-shapes --out data/shapes && spore train yolov5s --data data/shapes\n"
      "  spore coco-eval instances_val2017.json detections.json\n  spore run-check"};
  app.require_subcommand(1);
  // A bad flag or value: one line, then what to do (CLI11's default adds a second line).
  app.failure_message([](const CLI::App* top, const CLI::Error& err) {
    std::string cmd = "spore";
    for (const CLI::App* sub : top->get_subcommands()) cmd += " " + sub->get_name();
    return "spore: " + std::string(err.what()) + " (see `" + cmd + " --help`)\n";
  });
  app.set_version_flag("--version", std::string("spore ") + SPORE_VERSION);

  TrainArgs t;
  auto* train_cmd = app.add_subcommand("train",
                                       "train a model from the zoo and save its checkpoint, "
                                       "metrics and training curves");
  train_cmd
      ->add_option(
          "model", t.model,
          "lenet (Fashion-MNIST), mlp (Fashion-MNIST), "
          "mlp-regression (generated Friedman #1 data), resnet18 (CIFAR-10 in --data DIR), "
          "yolov5n | yolov5s | yolov5m (a COCO-layout folder in --data DIR), "
          "transformer (a generated token task; the operator-sharding showcase)")
      ->check(CLI::IsMember({"lenet", "mlp", "mlp-regression", "resnet18", "yolov5n", "yolov5s",
                             "yolov5m", "transformer"}))
      ->default_val("lenet");
  train_cmd->add_option("--epochs", t.epochs, "training epochs")
      ->default_val(t.epochs)
      ->check(kEpochs);
  train_cmd->add_option("--batch-size", t.batch_size, "samples per step")
      ->default_val(t.batch_size)
      ->check(kBatch);
  train_cmd->add_option("--lr", t.lr, "learning rate")->default_val(t.lr)->check(kLr);
  train_cmd->add_option("--momentum", t.momentum, "momentum of the Momentum optimizer")
      ->default_val(t.momentum)
      ->check(kMomentum);
  train_cmd
      ->add_option("--mode", t.mode,
                   "execution mode: graph (the training step traced and compiled "
                   "once, then run as one optimised graph) or pynative (op by op, eager)")
      ->check(CLI::IsMember({"graph", "pynative"}))
      ->default_val(t.mode);
  train_cmd
      ->add_option("--data", t.data,
                   "folder with the IDX files (train-images-idx3-ubyte[.gz], ...); for yolov5*: "
                   "train2017/, val2017/ and annotations/instances_{train,val}2017.json (spore "
                   "data make-shapes)")
      ->default_val(t.data);
  train_cmd->add_option("--img", t.img, "yolov5*: image size (letterboxed, a multiple of 32)")
      ->default_val(t.img)
      ->check(kImg);
  train_cmd->add_flag("--cos-lr", t.cos_lr,
                      "yolov5*: one-cycle cosine learning-rate schedule instead of linear");
  train_cmd->add_flag("--no-mosaic", t.no_mosaic,
                      "yolov5*: train without the 4-image mosaic augmentation");
  train_cmd->add_option(
      "--weights", t.weights,
      "yolov5*: start from the weights of a checkpoint `spore train yolov5*` "
      "wrote (YOLOv5's --weights: fine-tuning; the schedule, warm-up and EMA start afresh)");
  train_cmd
      ->add_option("--eval-every", t.eval_every,
                   "yolov5*: evaluate the EMA weights on val every N epochs "
                   "(and always after the last)")
      ->check(kEpochs);
  train_cmd->add_option("--out", t.out, "output folder (default out/<model>)");
  train_cmd->add_option("--seed", t.seed, "random seed (initialisation, shuffling)")
      ->default_val(t.seed)
      ->check(kSeed);
  train_cmd->add_option("--threads", t.threads, "threads (0: all cores)")
      ->default_val(t.threads)
      ->check(kThreads);
  train_cmd->add_option("--limit", t.limit, "use only the first N training samples")
      ->check(kSamples);
  train_cmd->add_option("--eval-limit", t.eval_limit, "use only the first N test samples")
      ->check(kSamples);
  train_cmd->add_flag("--verbose", t.verbose,
                      "print the network, parameter counts, memory use, (graph mode) the compiled "
                      "step's node counts, planned peak memory and cache statistics, and which "
                      "convolution implementation runs each conv and why (debug log)");
  train_cmd->add_option("--resume", t.resume,
                        "continue from a checkpoint written at an epoch end "
                        "(out/<model>/checkpoints/<model>-<epoch>_<step>.safetensors), "
                        "or 'auto': the newest in --out (none yet: start from scratch); with "
                        "--parallel mp / pp or --parallel-optimizer each rank reads its own "
                        "checkpoints/rank_<r>/ (name rank 0's file, or 'auto')");
  train_cmd->add_flag("--resume-partial", t.resume_partial,
                      "with --resume: restore what matches the network and "
                      "optimizer and restart the rest (listed), instead of "
                      "refusing a checkpoint that does not restore exactly");
  train_cmd
      ->add_option("--amp", t.amp,
                   "mixed precision level: O0 (float32), O1 (conv/matmul/relu in low "
                   "precision), O2 (all but BatchNorm, dynamic loss scaling), O3 (all)")
      ->default_val(t.amp);
  train_cmd->add_option(
      "--profile", t.profile,
      "record a profile into this folder: trace.json (Chrome trace "
      "events: open in ui.perfetto.dev or chrome://tracing) and summary.txt (top ops)");
  train_cmd->add_option(
      "--dump-ir", t.dump_ir,
      "Graph mode: write the compiled step's IR after every pass "
      "(<graph>.<NN>.<pass>.txt) and the final graph as Graphviz .dot into this folder");
  train_cmd->add_option("--amp-dtype", t.amp_dtype, "low-precision dtype for --amp: fp16 | bf16")
      ->default_val(t.amp_dtype);
  train_cmd
      ->add_option("--device", t.device,
                   "device target (MindSpore's device_target): CPU, GPU or Ascend; "
                   "`spore run-check` lists the targets this build has")
      ->default_val(t.device);
  train_cmd
      ->add_option("--grad-accum", t.grad_accum,
                   "gradient accumulation: each optimizer update sums the "
                   "gradients of this many batches of --batch-size (1: update on every batch)")
      ->default_val(t.grad_accum)
      ->check(integer_in(1, 4096));
  train_cmd->add_flag(
      "--parallel-optimizer", t.parallel_optimizer,
      "under spore launch: each rank keeps and "
      "updates 1/N of the optimizer state (MindSpore's enable_parallel_optimizer, ZeRO-1)");
  train_cmd->add_option(
      "--parallel", t.parallel,
      "under spore launch: the mesh \"dp=D,mp=M,pp=P\" (D x M x P ranks, any left out is 1): "
      "mp > 1 cuts the layers over M ranks (semi_auto_parallel, Megatron-style), dp cuts the "
      "batch, pp cuts the network into P pipeline stages (with dp or mp, inside each stage); "
      "\"auto\" in the list (transformer): auto_parallel, the first block's fc1 cut by hand and "
      "the other layers' strategies searched (--verbose prints them); "
      "default: data parallel over all ranks");
  train_cmd
      ->add_option("--comm-timeout", t.comm_timeout,
                   "under spore launch / mpirun: seconds before a "
                   "silent rank counts as lost")
      ->default_val(t.comm_timeout)
      ->check(kSeconds);

  LaunchArgs l;
  auto* launch_cmd = app.add_subcommand("launch",
                                        "run a command as N MPI ranks (data-parallel training): "
                                        "spore launch -n 2 -- spore train lenet");
  launch_cmd->add_option("-n,--np", l.n, "number of ranks (processes)")
      ->default_val(l.n)
      ->check(kRanks);
  launch_cmd->add_option("--hostfile", l.hostfile,
                         "OpenMPI hostfile (one 'host slots=K' per line) for several hosts");
  launch_cmd->add_flag("--all-ranks-print", l.all_ranks_print,
                       "every rank prints its progress (default: rank 0 only)");
  launch_cmd
      ->add_option("--comm-timeout", l.comm_timeout,
                   "seconds before a silent rank counts as lost (default 60)")
      ->check(kSeconds);
  launch_cmd->add_option("command", l.command, "the command after --, e.g. -- spore train lenet")
      ->required();

  EvalArgs e;
  auto* eval_cmd = app.add_subcommand("eval", "evaluate a saved checkpoint on the test set");
  eval_cmd
      ->add_option(
          "model", e.model,
          "lenet | mlp | resnet18 | yolov5n | yolov5s | yolov5m (prints COCO's 12 numbers)")
      ->check(CLI::IsMember({"lenet", "mlp", "resnet18", "yolov5n", "yolov5s", "yolov5m"}))
      ->default_val("lenet");
  eval_cmd->add_option("--img", e.img, "yolov5*: image size (default: the checkpoint's)")
      ->check(kImg);
  eval_cmd->add_option("--save-json", e.save_json,
                       "yolov5*: also write the detections as a COCO results file");
  eval_cmd
      ->add_option("--ckpt", e.ckpt,
                   "checkpoint file: .safetensors written by `spore train`, or a "
                   "MindSpore .ckpt (zoo parameter names)")
      ->required();
  eval_cmd->add_option("--data", e.data, "folder with the IDX files")->default_val(e.data);
  eval_cmd->add_option("--batch-size", e.batch_size, "samples per step")
      ->default_val(e.batch_size)
      ->check(kBatch);
  eval_cmd->add_option("--limit", e.limit, "use only the first N test samples")->check(kSamples);
  eval_cmd->add_option("--device", e.device, "device target: CPU, GPU or Ascend")
      ->default_val(e.device);
  eval_cmd->add_flag("--strict-load", e.strict_load,
                     "fail when the checkpoint holds entries the network lacks "
                     "(by default training state such as the optimizer's moments.* is "
                     "skipped and reported, as MindSpore's load_param_into_net does)");

  PredictArgs pr;
  auto* predict_cmd =
      app.add_subcommand("predict",
                         "detect objects in an image with a trained checkpoint and write "
                         "the image with the boxes drawn");
  predict_cmd->add_option("model", pr.model, "yolov5n | yolov5s | yolov5m")
      ->check(CLI::IsMember({"yolov5n", "yolov5s", "yolov5m"}))
      ->required();
  predict_cmd->add_option("image", pr.image, "a JPEG or PNG image")->required();
  predict_cmd->add_option("--ckpt", pr.ckpt, "checkpoint (.safetensors) written by `spore train`")
      ->required();
  predict_cmd->add_option("--out", pr.out, "output image (default <image name>_pred.jpg)");
  predict_cmd->add_option("--img", pr.img, "image size (default: the checkpoint's)")->check(kImg);
  predict_cmd->add_option("--conf", pr.conf, "confidence threshold")
      ->default_val(pr.conf)
      ->check(kUnit);
  predict_cmd->add_option("--iou", pr.iou, "NMS IoU threshold")->default_val(pr.iou)->check(kUnit);

  CocoEvalArgs ce;
  auto* coco_cmd =
      app.add_subcommand("coco-eval",
                         "COCO detection metrics (pycocotools' 12 numbers, 'bbox') of a results "
                         "file against ground truth");
  coco_cmd
      ->add_option("gt", ce.gt,
                   "ground truth: a COCO instances JSON (images, annotations, categories)")
      ->required();
  coco_cmd
      ->add_option("results", ce.results,
                   "detections: a JSON list of {image_id, category_id, bbox, score}")
      ->required();
  coco_cmd->add_flag("--json", ce.json, "print the 12 numbers as JSON with full precision");

  MakeShapesArgs ms;
  auto* data_cmd = app.add_subcommand("data", "data-set tools");
  data_cmd->require_subcommand(1);
  auto* shapes_cmd =
      data_cmd->add_subcommand("make-shapes",
                               "write a generated detection data set (8 shape classes) in "
                               "COCO's layout: JPEG images and instances JSON");
  shapes_cmd->add_option("--out", ms.out, "output folder")->required();
  shapes_cmd->add_option("--train", ms.train, "training images")
      ->default_val(ms.train)
      ->check(kImages);
  shapes_cmd->add_option("--val", ms.val, "validation images")->default_val(ms.val)->check(kImages);
  shapes_cmd->add_option("--size", ms.size, "longer image side in pixels")
      ->default_val(ms.size)
      ->check(kImg);
  shapes_cmd->add_option("--max-objects", ms.max_objects, "objects per image at most")
      ->default_val(ms.max_objects)
      ->check(integer_in(1, 100));
  shapes_cmd->add_option("--seed", ms.seed, "random seed")->default_val(ms.seed)->check(kSeed);

  DashboardArgs d;
  auto* dash_cmd =
      app.add_subcommand("dashboard",
                         "serve a training run's curves, hyper-parameters, checkpoints "
                         "and profiler summary as a web page (updates while it trains)");
  dash_cmd
      ->add_option("run_dir", d.run_dir, "the --out folder of a `spore train` run, e.g. out/lenet")
      ->required();
  dash_cmd->add_option("--port", d.port, "TCP port")
      ->default_val(d.port)
      ->check(integer_in(1, 65535));
  dash_cmd->add_option("--host", d.host, "address to listen on (127.0.0.1: this machine only)")
      ->default_val(d.host);

  ConvertArgs cv;
  auto* convert_cmd =
      app.add_subcommand("convert",
                         "convert a checkpoint between safetensors and MindSpore .ckpt "
                         "(the input's format is read from its content, the output's "
                         "from its extension)");
  convert_cmd->add_option("in", cv.in, "checkpoint to read (.safetensors or .ckpt)")->required();
  convert_cmd->add_option("out", cv.out, "checkpoint to write: .ckpt (MindSpore) or .safetensors")
      ->required();
  convert_cmd
      ->add_option("--model", cv.model,
                   "rename parameters between Spore's and MindSpore's model zoo for "
                   "this family when the format changes: auto (guess from the names), "
                   "lenet, mlp, resnet18, resnet34, resnet50, none (keep names)")
      ->check(CLI::IsMember({"auto", "lenet", "mlp", "resnet18", "resnet34", "resnet50", "none"}))
      ->default_val(cv.model);
  convert_cmd->add_flag("--merge", cv.merge,
                        "merge every rank's checkpoint of a pipelined, sharded (mp) or ZeRO-1 run "
                        "into one whole file (parameters and optimizer state): in is one "
                        "file of the set (out/checkpoints/rank_0/x.safetensors) or the folder "
                        "of the rank_<r>/ folders (their latest files)");
  convert_cmd->add_flag("--split", cv.split,
                        "cut a merged pipeline checkpoint back into its stages: writes "
                        "out/rank_<s>/<in's name>");

  ExportArgs ex;
  auto* export_cmd =
      app.add_subcommand("export",
                         "export a zoo model to ONNX (opset 17, dynamic batch): "
                         "spore export lenet --ckpt out/lenet/lenet.safetensors --out lenet.onnx");
  export_cmd
      ->add_option("model", ex.model,
                   "lenet | mlp | resnet18 | yolov5n | yolov5s | yolov5m (the decoded"
                   " predictions (N, boxes, 5 + classes), before NMS)")
      ->check(CLI::IsMember({"lenet", "mlp", "resnet18", "yolov5n", "yolov5s", "yolov5m"}))
      ->required();
  export_cmd->add_option(
      "--ckpt", ex.ckpt,
      "weights (.safetensors or MindSpore .ckpt); without it the initial weights");
  export_cmd->add_option("--format", ex.format, "onnx")
      ->check(CLI::IsMember({"onnx"}))
      ->default_val(ex.format);
  export_cmd->add_option("--out", ex.out, "output file (default <model>.onnx)");
  export_cmd->add_flag("--static-batch", ex.static_batch,
                       "a fixed batch size (--batch) instead of the symbolic N");
  export_cmd->add_option("--input", ex.input,
                         "also run the network (inference mode) on this array (.npy) ...");
  export_cmd->add_option("--output", ex.output,
                         "... and write its output here (.npy), to compare with a runtime");
  export_cmd
      ->add_option(
          "--img", ex.img,
          "yolov5*: the image size of the exported input (default: the checkpoint's, or 320)")
      ->check(integer_in(32, 4096));
  export_cmd->add_option("--batch", ex.batch, "the batch size with --static-batch")
      ->default_val(ex.batch)
      ->check(kBatch);

  InferArgs inf;
  auto* infer_cmd = app.add_subcommand(
      "infer",
      "run an ONNX model with Spore (Graph mode) or a compiled model: "
      "spore infer model.onnx|model.spore --input x.npy|in.npz --output y.npy|out.npz [--bench]");
  infer_cmd->add_option("model", inf.model, "the .onnx or compiled .spore file")->required();
  infer_cmd->add_option(
      "--input", inf.input,
      "the input array (.npy), or an .npz with one array per model input, named as the inputs");
  infer_cmd->add_option("--output", inf.output,
                        "write the output here (.npy; a model with several outputs needs .npz: one "
                        "array per output, by name)");
  infer_cmd->add_flag("--bench", inf.bench,
                      "measure: repeated runs after a warm-up, median time and samples/s");
  infer_cmd
      ->add_option("--batch", inf.batch,
                   "with --bench and no --input: random input of this batch size")
      ->default_val(inf.batch)
      ->check(kBatch);
  infer_cmd->add_option("--seconds", inf.seconds, "with --bench: how long to measure")
      ->default_val(inf.seconds)
      ->check(kSeconds);
  infer_cmd
      ->add_option("--mode", inf.mode,
                   "graph (traced, optimised, compiled once per input shape) or pynative")
      ->check(CLI::IsMember({"graph", "pynative"}))
      ->default_val(inf.mode);
  infer_cmd
      ->add_option("--device", inf.device,
                   "where an ONNX model runs: CPU, GPU or Ascend (its weights are uploaded once; "
                   "the inputs are copied there and the outputs back)")
      ->default_val(inf.device);

  CompileArgs cmp;
  auto* compile_cmd = app.add_subcommand(
      "compile",
      "compile an ONNX model or a zoo model (+ checkpoint) once into a .spore file that loads "
      "without tracing or graph passes: spore compile resnet18.onnx --batch 1,64 -o r18.spore");
  compile_cmd->add_option("source", cmp.source, "an .onnx file, or lenet|mlp|resnet18|yolov5n|s|m")
      ->required();
  compile_cmd->add_option("--ckpt", cmp.ckpt, "zoo models: the checkpoint with the weights");
  compile_cmd->add_option("-o,--out", cmp.out, "the .spore file (default: the source's name)");
  compile_cmd->add_option("--batch", cmp.batch,
                          "batch sizes to compile a graph for, comma-separated (default 1); "
                          "other batches of a dynamic-batch model run as chunks of these");
  compile_cmd->add_option("--img", cmp.img, "yolov5*: the image size");
  compile_cmd
      ->add_option("--device", cmp.device,
                   "the target: CPU, or GPU (the graphs get that device's kernels and passes, and "
                   "the file loads its weights there; spore infer runs it with --device GPU)")
      ->default_val(cmp.device);
  std::string info_path;
  auto* info_cmd =
      app.add_subcommand("info", "print what a compiled model file holds: spore info m.spore");
  info_cmd->add_option("model", info_path, "the .spore file")->required();

  auto* check_cmd = app.add_subcommand("run-check",
                                       "print the build (version, backends and their devices, "
                                       "libraries, CPU features) and run one tiny training step");
  std::string check_device = "CPU";
  check_cmd
      ->add_option("--device", check_device, "where the training step runs: CPU, GPU or Ascend")
      ->default_val(check_device);

  // Under a file-size limit (ulimit -f) a write past it would kill the process with SIGXFSZ;
  // ignored, the write fails with EFBIG and the checkpoint writer reports it (and keeps the
  // previous file).
  std::signal(SIGXFSZ, SIG_IGN);
  // No command, or an unknown first word (a mistyped command): say so and list the commands
  // (CLI11 alone says "A subcommand is required").
  if (argc == 1 || argv[1][0] != '-') {
    std::vector<std::string> names;
    for (const CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
      names.push_back(sub->get_name());
    std::string list;
    for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
    if (argc == 1) {
      std::fprintf(stderr, "spore: a command is required: one of %s (see `spore --help`)\n",
                   list.c_str());
      return 2;
    }
    if (std::find(names.begin(), names.end(), argv[1]) == names.end()) {
      std::fprintf(stderr,
                   "spore: unknown command '%s'; the commands are %s (see `spore --help`)\n",
                   argv[1], list.c_str());
      return 2;
    }
    // `spore data <word>`: the same for the data set tools.
    std::string subs;
    bool known = false;
    for (const CLI::App* sub : data_cmd->get_subcommands([](CLI::App*) { return true; })) {
      subs += (subs.empty() ? "" : ", ") + sub->get_name();
      known = known || (argc > 2 && sub->get_name() == argv[2]);
    }
    if (std::string(argv[1]) == "data" && argc == 2) {
      std::fprintf(stderr, "spore: data needs a command: one of %s (see `spore data --help`)\n",
                   subs.c_str());
      return 2;
    }
    if (std::string(argv[1]) == "data" && argc > 2 && argv[2][0] != '-' && !known) {
      std::fprintf(stderr,
                   "spore: unknown command 'data %s'; the data commands are %s (see `spore data "
                   "--help`)\n",
                   argv[2], subs.c_str());
      return 2;
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? 0 : 2;  // --help / --version: 0; usage errors: 2 (CLI11 uses 100+)
  }
  // Detector-only flags given to a classifier would be ignored without a word: refused instead.
  auto yolo_only = [](CLI::App* cmd, const std::string& model,
                      std::initializer_list<const char*> flags) {
    if (model.rfind("yolov5", 0) == 0) return true;
    for (const char* f : flags)
      if (cmd->count(f) > 0) {
        std::fprintf(stderr,
                     "spore: %s applies to yolov5* only; %s does not take it (remove it; see "
                     "`spore %s --help`)\n",
                     f, model.c_str(), cmd->get_name().c_str());
        return false;
      }
    return true;
  };
  if ((*train_cmd &&
       !yolo_only(train_cmd, t.model,
                  {"--img", "--cos-lr", "--no-mosaic", "--weights", "--eval-every"})) ||
      (*eval_cmd && !yolo_only(eval_cmd, e.model, {"--img", "--save-json"})))
    return 2;
  try {
    if (*train_cmd) {
      // --verbose: the library's debug lines too (which convolution implementation runs each conv,
      // and why), unless SPORE_LOG_LEVEL says otherwise.
      if (t.verbose && !std::getenv("SPORE_LOG_LEVEL")) enable_debug_log();
      t.lr_given = train_cmd->count("--lr") > 0;
      t.batch_given = train_cmd->count("--batch-size") > 0;
      return train(t);
    }
    if (*eval_cmd) return eval(e);
    if (*predict_cmd) return predict(pr);
    if (*coco_cmd) return coco_eval(ce);
    if (*shapes_cmd) return make_shapes(ms);
    if (*check_cmd) {
      spore::set_device(check_device);
      return run_check();
    }
    if (*launch_cmd) return launch(l);
    if (*dash_cmd) return dashboard(d);
    if (*convert_cmd) return convert(cv);
    if (*export_cmd) return export_model(ex);
    if (*infer_cmd) return infer(inf);
    if (*compile_cmd) return compile(cmp);
    if (*info_cmd) return info(info_path);
  } catch (const spore::Error& err) {
    std::cerr << "spore" << rank_tag() << ": " << spore::error_kind_name(err.kind()) << ": "
              << one_line(err.what()) << "\n";
    stop_all_ranks();
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "spore" << rank_tag()
              << ": out of memory; use a smaller --batch-size or model, or free memory\n";
    stop_all_ranks();
    return 1;
  } catch (const std::exception& err) {
    // Not a spore::Error: a failure the library did not put into words (a bug worth reporting).
    std::cerr << "spore" << rank_tag() << ": internal error: " << one_line(err.what())
              << " (please report it with the command line that caused it)\n";
    stop_all_ranks();
    return 1;
  }
  return 0;
}
