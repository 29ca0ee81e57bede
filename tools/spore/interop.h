// The CLI's interop commands (interop.cpp): spore convert, spore export, spore infer.
#pragma once
#include <cstdint>
#include <string>

namespace spore::cli {

// `spore convert IN OUT`: between safetensors and MindSpore .ckpt (OUT's extension picks the
// format; IN's is read from its content). Names are mapped between Spore's and MindSpore's model
// zoo when the format changes (--model auto guesses the family; none keeps the names).
struct ConvertArgs {
  std::string in, out;
  std::string model = "auto";
  // Per-rank checkpoints: --merge reads every rank's file of the set `in` (a rank_<r>/ file or
  // their folder) and writes one whole file `out`; --split cuts a merged pipeline file `in` into
  // its stages, `out`/rank_<s>/.
  bool merge = false, split = false;
};
int convert(const ConvertArgs& a);

// `spore export MODEL --ckpt FILE --format onnx --out model.onnx`
struct ExportArgs {
  std::string model = "lenet";
  std::string ckpt;  // optional: without it the freshly initialised weights are exported
  std::string format = "onnx";
  std::string out;
  bool static_batch = false;
  int64_t batch = 1;          // the batch of the exported input when --static-batch
  std::string input, output;  // optional: run the network on input (.npy), write its output (.npy)
  int64_t img = 0;            // yolov5*: the exported image size (0: the checkpoint's, or 320)
};
int export_model(const ExportArgs& a);

// `spore infer model.onnx --input x.npy [--output y.npy] [--bench]`
struct InferArgs {
  std::string model;
  std::string
      input;  // .npy, or .npz by input name; without it (with --bench) random data of --batch
  std::string output;  // .npy (one output) or .npz (every output, by name); default: a summary only
  bool bench = false;
  int64_t batch = 1;           // --bench without --input: the batch size
  double seconds = 3;          // --bench: how long to measure
  std::string mode = "graph";  // graph | pynative
  std::string device = "CPU";  // where an ONNX model runs (CPU, GPU, Ascend)
};
int infer(const InferArgs& a);

// `spore compile model.onnx|ZOO_MODEL [--ckpt FILE] [--batch 1,64] [-o model.spore]`: the
// compiled model file (spore/deploy.h).
struct CompileArgs {
  std::string source;  // an .onnx file or a zoo model name
  std::string ckpt;    // zoo models: the weights (default: the initial ones)
  std::string out;     // default: the source's name with .spore
  std::string batch;   // comma-separated batch sizes (default: 1, or the ONNX model's fixed one)
  int64_t img = 0;     // yolov5*: the image size
  std::string device = "CPU";  // the target the graphs are compiled for and load onto
};
int compile(const CompileArgs& a);
// `spore info model.spore`: what the compiled file holds.
int info(const std::string& path);

}  // namespace spore::cli
