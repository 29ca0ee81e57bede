// spore convert / export / infer (interop.h): checkpoints between safetensors and MindSpore's
// .ckpt, ONNX export of the model zoo, and running ONNX models with Spore's Graph mode.
#include "interop.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <sstream>

#include "models/lenet.h"
#include "models/mindspore_names.h"
#include "models/mlp.h"
#include "models/resnet.h"
#include "models/yolov5/yolov5.h"
#include "spore/deploy.h"
#include "spore/io/checkpoint.h"
#include "spore/io/npy.h"
#include "spore/onnx.h"
#include "spore/parallel/pipeline_checkpoint.h"
#include "spore/parallel/rank_checkpoint.h"
#include "spore/spore.h"

namespace spore::cli {
namespace {

// The zoo's models and the input each takes (one image).
struct ZooModel {
  nn::CellPtr net;
  Shape input;
};
// YOLOv5: the class count and image size come from the checkpoint `spore train yolov5*` wrote
// (metadata class_names, img); without one, COCO's 80 classes at 320 px.
ZooModel make_yolo(const std::string& m, const std::string& ckpt, int64_t img_override) {
  int64_t classes = 80, img = 320;
  if (!ckpt.empty()) {
    const io::Checkpoint ck = io::load_checkpoint(ckpt);
    const auto names = ck.metadata.find("class_names"), size = ck.metadata.find("img");
    SPORE_CHECK(names != ck.metadata.end() && size != ck.metadata.end(), "checkpoint ", ckpt,
                " has no class_names / img metadata; pass a checkpoint written by `spore train ", m,
                "`");
    classes = int64_t(std::count(names->second.begin(), names->second.end(), '\n')) + 1;
    img = std::stoll(size->second);
  }
  if (img_override > 0) img = img_override;
  SPORE_CHECK(img % 32 == 0, "--img ", img, " is not a multiple of 32 (YOLOv5's largest stride)");
  auto net = models::yolov5(m.substr(6), classes);
  net->set_train(false);
  return {net, {1, 3, img, img}};
}

ZooModel make_model(const std::string& m, const std::string& ckpt = "", int64_t img = 0) {
  if (m.rfind("yolov5", 0) == 0) return make_yolo(m, ckpt, img);
  SPORE_CHECK(img == 0, "--img applies to yolov5* only; ", m, " takes a fixed input size");
  if (m == "lenet") return {std::make_shared<models::LeNet5>(), {1, 1, 28, 28}};
  if (m == "mlp")
    return {std::make_shared<models::MLP>(std::vector<int64_t>{784, 512, 256, 10}), {1, 1, 28, 28}};
  if (m == "resnet18") return {models::resnet18(10, models::ResNetStem::Cifar), {1, 3, 32, 32}};
  SPORE_THROW(ErrorKind::ValueError, "unknown model '", m,
              "'; expected lenet, mlp, resnet18 or yolov5n|s|m");
}

// The zoo network with the checkpoint's weights (MindSpore .ckpt names are mapped to Spore's).
ZooModel make_model_with_checkpoint(const std::string& model, const std::string& ckpt,
                                    int64_t img) {
  ZooModel zm = make_model(model, ckpt, img);
  if (!ckpt.empty()) {
    io::Checkpoint ck = io::load_checkpoint(ckpt);
    io::NamedTensors ts = ck.format == io::CheckpointFormat::MindSpore
                              ? models::from_mindspore_names(model, ck.tensors)
                              : ck.tensors;
    io::LoadReport rep = io::load_param_into_net(*zm.net, ts, false);
    SPORE_CHECK(rep.missing.empty() && rep.mismatched.empty(), "checkpoint ", ckpt,
                " does not fit the ", model, " network: ", rep.summary(),
                "; pass a checkpoint of this model");
  }
  return zm;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

double mib(const io::NamedTensors& ts) {
  size_t n = 0;
  for (const auto& [name, t] : ts) n += t.nbytes();
  return double(n) / 1048576.0;
}

}  // namespace

namespace {

namespace fs = std::filesystem;

// --merge: `in` is one file of a per-rank set (<dir>/rank_<r>/<name>) or the folder holding the
// rank_<r>/ folders (then each one's `latest` names its file). Returns every rank's file.
std::vector<std::string> rank_files(const std::string& in) {
  fs::path set_dir;
  std::string name;
  if (fs::is_directory(in)) {
    set_dir = in;
  } else {
    SPORE_CHECK(fs::exists(in), "convert --merge: ", in, " does not exist; pass one rank's file ",
                "(out/checkpoints/rank_0/<name>.safetensors) or its checkpoints folder");
    set_dir = fs::path(in).parent_path().parent_path();
    name = fs::path(in).filename().string();
  }
  std::map<int, fs::path> by_rank;
  for (const auto& e : fs::directory_iterator(set_dir.empty() ? fs::path(".") : set_dir)) {
    const std::string d = e.path().filename().string();
    if (!e.is_directory() || d.rfind("rank_", 0) != 0) continue;
    fs::path f;
    if (!name.empty()) {
      f = e.path() / name;
    } else {
      std::ifstream latest(e.path() / "latest");
      std::string line;
      if (!std::getline(latest, line)) continue;
      f = fs::path(line).is_absolute() ? fs::path(line) : e.path() / fs::path(line).filename();
    }
    if (fs::exists(f)) by_rank[std::stoi(d.substr(5))] = f;
  }
  SPORE_CHECK(!by_rank.empty(), "convert --merge: no rank_<r>/", name.empty() ? "latest" : name,
              " under ", set_dir.string(),
              "; pass a file or folder written by ModelCheckpoint in a pipelined, sharded or "
              "ZeRO-1 run");
  std::vector<std::string> files;
  for (const auto& [r, f] : by_rank) files.push_back(f.string());
  return files;
}

int merge_ranks(const ConvertArgs& a) {
  std::vector<io::Checkpoint> cks;
  for (const std::string& f : rank_files(a.in)) cks.push_back(io::load_checkpoint(f));
  const io::Checkpoint merged = parallel::merge_rank_checkpoints(cks);
  io::save_checkpoint(merged.tensors, a.out, merged.metadata, io::format_for_path(a.out));
  std::printf("merged %zu rank checkpoints (%zu tensors, %.2f MiB) into %s\n", cks.size(),
              merged.tensors.size(), mib(merged.tensors), a.out.c_str());
  return 0;
}

int split_stages(const ConvertArgs& a) {
  const io::Checkpoint merged = io::load_checkpoint(a.in);
  const std::vector<io::Checkpoint> parts = parallel::split_stage_checkpoint(merged);
  const std::string name = fs::path(a.in).filename().string();
  for (size_t s = 0; s < parts.size(); ++s) {
    const fs::path dir = fs::path(a.out) / ("rank_" + std::to_string(s));
    fs::create_directories(dir);
    io::save_checkpoint(parts[s].tensors, (dir / name).string(), parts[s].metadata);
  }
  std::printf("split %s into %zu stage checkpoints under %s/rank_<s>/%s\n", a.in.c_str(),
              parts.size(), a.out.c_str(), name.c_str());
  return 0;
}

}  // namespace

int convert(const ConvertArgs& a) {
  SPORE_CHECK(!(a.merge && a.split), "convert: --merge and --split go one way each; pass one");
  if (a.merge) return merge_ranks(a);
  if (a.split) return split_stages(a);
  // The output's format comes from its name: a name that is neither would silently be safetensors.
  SPORE_CHECK(ends_with(a.out, ".ckpt") || ends_with(a.out, ".safetensors"), a.out,
              ": expected a name ending in .ckpt (MindSpore) or .safetensors (the output's format "
              "is read from its extension)");
  io::Checkpoint ck = io::load_checkpoint(a.in);
  const io::CheckpointFormat to = io::format_for_path(a.out);
  io::NamedTensors ts = ck.tensors;
  std::string renamed;
  if (a.model != "none" && ck.format != to) {
    const std::string family = a.model == "auto" ? models::guess_naming(ts) : a.model;
    io::NamedTensors mapped = to == io::CheckpointFormat::MindSpore
                                  ? models::to_mindspore_names(family, ts)
                                  : models::from_mindspore_names(family, ts);
    size_t n = 0;
    for (size_t i = 0; i < ts.size(); ++i) n += mapped[i].first != ts[i].first;
    if (n)
      renamed = "; renamed " + std::to_string(n) + " names " +
                (to == io::CheckpointFormat::MindSpore ? "Spore -> MindSpore zoo"
                                                       : "MindSpore zoo -> Spore") +
                " (" + family + ")";
    ts = std::move(mapped);
  }
  if (to == io::CheckpointFormat::MindSpore && !ck.metadata.empty())
    std::printf("note: the %zu metadata entries of %s are not kept (.ckpt has no place for them)\n",
                ck.metadata.size(), a.in.c_str());
  io::save_checkpoint(ts, a.out, ck.metadata, to);
  std::printf("converted %zu tensors (%.2f MiB) from %s (%s) to %s (%s)%s\n", ts.size(), mib(ts),
              a.in.c_str(), io::format_name(ck.format), a.out.c_str(), io::format_name(to),
              renamed.c_str());
  return 0;
}

int export_model(const ExportArgs& a) {
  if (!a.input.empty()) {  // checked before the export, not after it
    SPORE_CHECK(!a.output.empty(), "--input needs --output (where to write the network's output)");
    SPORE_CHECK(ends_with(a.output, ".npy"), "--output ", a.output,
                ": expected a file name ending in .npy (the network's one output is written so)");
  }
  SPORE_CHECK(a.format == "onnx", "--format ", a.format, " is not supported; expected onnx");
  ZooModel zm = make_model_with_checkpoint(a.model, a.ckpt, a.img);
  const std::string out = a.out.empty() ? a.model + ".onnx" : a.out;
  Shape in = zm.input;
  in[0] = a.static_batch ? a.batch : 1;
  export_onnx(*zm.net, Tensor::empty(in), out, {.dynamic_batch = !a.static_batch});
  if (!a.input.empty()) {  // the network's own output, for comparing runtimes
    zm.net->set_train(false);
    io::save_npy((*zm.net)(io::load_npy(a.input)), a.output);
  }
  std::printf("exported %s%s to %s (ONNX opset 17, input \"input\" %s, output \"output\")\n",
              a.model.c_str(),
              a.ckpt.empty() ? " (initial weights)" : (" (" + a.ckpt + ")").c_str(), out.c_str(),
              a.static_batch
                  ? shape_str(in).c_str()
                  : ("(N, " + shape_str(Shape(in.begin() + 1, in.end())).substr(1)).c_str());
  return 0;
}

// An array file to write: .npy or .npz by its name, so that what is written is what the name says.
void check_array_file(const char* flag, const std::string& path) {
  SPORE_CHECK(path.empty() || ends_with(path, ".npy") || ends_with(path, ".npz"), flag, " ", path,
              ": expected a file name ending in .npy (one array) or .npz (one array per output); "
              "that is the format written");
}

int infer(const InferArgs& a) {
  // A compiled model (spore compile) or an ONNX model (compiled here, at load).
  struct Runner {
    std::vector<OnnxValueInfo> inputs, outputs;
    std::function<std::vector<Tensor>(const std::vector<Tensor>&)> run;
  } m;
  const bool graph = a.mode == "graph";
  set_device(a.device);  // an error naming the targets this build has, or why there is no device
  const Device device = current_device();
  using clk = std::chrono::steady_clock;
  const auto t_load = clk::now();  // load-to-first-result: the file read, the model made, one run
  if (CompiledModel::is_model_file(a.model)) {
    SPORE_CHECK(graph, "--mode ", a.mode, ": ", a.model,
                " is a compiled model (its graph is fixed); --mode applies to ONNX models");
    auto cm = std::make_shared<CompiledModel>(CompiledModel::load(a.model));
    SPORE_CHECK(
        device.type == DeviceType::CPU || cm->device() == device_type_name(device.type),
        "--device ", a.device, ": ", a.model, " is compiled for the ", cm->device(),
        " (its graph holds that device's kernels and weight layouts); run it with --device ",
        cm->device(), ", or run the .onnx it came from with --device ", a.device);
    for (const auto* list : {&cm->inputs(), &cm->outputs()})
      for (const auto& io : *list)
        (list == &cm->inputs() ? m.inputs : m.outputs).push_back({io.name, io.shape, "", io.dtype});
    m.run = [cm](const std::vector<Tensor>& xs) { return cm->run(xs); };
  } else {
    auto om = std::make_shared<OnnxModel>(OnnxModel::load(a.model));
    const auto bad = om->unsupported_ops();
    if (!bad.empty()) {
      std::string list;
      for (const auto& b : bad) list += (list.empty() ? "" : ", ") + b;
      SPORE_THROW(ErrorKind::NotImplemented, a.model,
                  " uses ONNX ops Spore does not support: ", list);
    }
    m.inputs = om->inputs();
    m.outputs = om->outputs();
    m.run = [om, graph](const std::vector<Tensor>& xs) { return om->run(xs, graph); };
  }
  check_array_file("--output", a.output);  // before the model runs, not after
  // Inputs: one .npy for a one-input model, or an .npz whose arrays are named as the inputs.
  const auto& ins = m.inputs;
  std::vector<Tensor> xs;
  if (!a.input.empty() && ends_with(a.input, ".npz")) {
    const io::NamedArrays arrays = io::load_npz(a.input);
    std::string have, wanted;
    for (const auto& [n, t] : arrays) have += (have.empty() ? "" : ", ") + n;
    for (const auto& in : ins) wanted += (wanted.empty() ? "'" : ", '") + in.name + "'";
    std::vector<bool> used(arrays.size(), false);
    for (const auto& in : ins) {
      auto it = std::find_if(arrays.begin(), arrays.end(),
                             [&](const auto& p) { return p.first == in.name; });
      if (it == arrays.end() && ins.size() == 1 && arrays.size() == 1) {
        it = arrays.begin();  // one array for one input: its name does not matter, but say so
        std::fprintf(stderr, "note: %s's input '%s' takes %s's only array, '%s'\n", a.model.c_str(),
                     in.name.c_str(), a.input.c_str(), it->first.c_str());
      }
      SPORE_CHECK(it != arrays.end(), a.input, " has no array named '", in.name, "' (", a.model,
                  "'s input); it has: ", have.empty() ? "none" : have,
                  "; save it with numpy.savez(path, **{'", in.name, "': x})");
      used[size_t(it - arrays.begin())] = true;
      xs.push_back(it->second);
    }
    std::string extra;
    for (size_t i = 0; i < arrays.size(); ++i)
      if (!used[i]) extra += (extra.empty() ? "'" : ", '") + arrays[i].first + "'";
    SPORE_CHECK(extra.empty(), a.input, " has arrays that no input of ", a.model, " takes: ", extra,
                " (its inputs: ", wanted,
                "); a misspelt name would leave an input unfed, so "
                "remove them or name them as the inputs");
  } else if (!a.input.empty()) {
    SPORE_CHECK(ins.size() == 1, a.model, " takes ", ins.size(),
                " inputs; pass them in an .npz archive with one array"
                " per input, named as the inputs (numpy.savez)");
    xs.push_back(io::load_npy(a.input));
  } else {
    SPORE_CHECK(
        a.bench,
        "--input x.npy (or in.npz) is required (or --bench with --batch N for random data)");
    for (const auto& in : ins) {
      Shape s;
      for (int64_t d : in.shape) s.push_back(d < 0 ? a.batch : d);
      xs.push_back(randn(s).to(in.dtype));
    }
  }
  for (Tensor& x : xs) x = x.to(device);  // the model runs where its inputs are
  // A device's ops return once queued: the results copied back to the host end each run timed.
  auto run_to_host = [&] {
    std::vector<Tensor> out = m.run(xs);
    for (Tensor& t : out) t = t.to(Device{});
    return out;
  };
  const auto t_first = clk::now();
  std::vector<Tensor> y = run_to_host();
  const double first_ms = std::chrono::duration<double, std::milli>(clk::now() - t_load).count();
  const double run_ms = std::chrono::duration<double, std::milli>(clk::now() - t_first).count();
  if (ends_with(a.output, ".npz")) {
    io::NamedArrays outs;
    for (size_t i = 0; i < y.size(); ++i)
      outs.emplace_back(i < m.outputs.size() ? m.outputs[i].name : "output_" + std::to_string(i),
                        y[i]);
    io::save_npz(outs, a.output);
  } else if (!a.output.empty()) {
    SPORE_CHECK(y.size() == 1, a.model, " has ", y.size(),
                " outputs; write them with --output out.npz (one array per"
                " output, by name)");
    io::save_npy(y[0], a.output);
  }
  std::string in_shapes;
  for (const Tensor& x : xs)
    in_shapes +=
        (in_shapes.empty() ? "" : ", ") + shape_str(x.shape()) + " " + dtype_name(x.dtype());
  std::printf("%s: input %s -> output %s %s%s%s%s\n", a.model.c_str(), in_shapes.c_str(),
              shape_str(y[0].shape()).c_str(), dtype_name(y[0].dtype()),
              y.size() > 1 ? (" (+" + std::to_string(y.size() - 1) + " more)").c_str() : "",
              a.output.empty() ? "" : ", written to ", a.output.c_str());
  std::printf("load to first result: %.2f ms (first run %.2f ms, inputs read in between)\n",
              first_ms, run_ms);
  if (!a.bench) return 0;
  // Warm-up done above (compilation); then as many runs as fit in --seconds, at least 5.
  std::vector<double> ms;
  const auto t0 = clk::now();
  while (ms.size() < 5 || std::chrono::duration<double>(clk::now() - t0).count() < a.seconds) {
    const auto s = clk::now();
    y = run_to_host();
    ms.push_back(std::chrono::duration<double, std::milli>(clk::now() - s).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  std::printf("bench: batch %lld, %zu runs, median %.3f ms, best %.3f ms, %.1f samples/s\n",
              (long long)xs[0].shape()[0], ms.size(), med, ms.front(),
              double(xs[0].shape()[0]) * 1000.0 / med);
  return 0;
}

}  // namespace spore::cli

namespace spore::cli {

int compile(const CompileArgs& a) {
  std::vector<int64_t> batches;
  std::stringstream ss(a.batch);
  for (std::string tok; std::getline(ss, tok, ',');) {
    size_t used = 0;
    int64_t b = 0;
    try {
      b = std::stoll(tok, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    SPORE_CHECK(used == tok.size() && !tok.empty() && b >= 1, "--batch ", a.batch,
                ": expected batch sizes >= 1 separated by commas (e.g. 1,64)");
    batches.push_back(b);
  }
  using clk = std::chrono::steady_clock;
  const auto t0 = clk::now();
  // The target: an error naming the targets this build has, or why there is no such device. A zoo
  // network is built there.
  set_device(a.device);
  const Device target = current_device();
  CompiledModel m;
  std::string out = a.out;
  if (ends_with(a.source, ".onnx")) {
    SPORE_CHECK(a.ckpt.empty(), "--ckpt applies to zoo models; ", a.source,
                " carries its own weights");
    m = CompiledModel::from_onnx(
        a.source, {.batches = batches, .source = "onnx:" + a.source, .device = target});
    if (out.empty()) out = a.source.substr(0, a.source.size() - 5) + ".spore";
  } else {
    ZooModel zm = make_model_with_checkpoint(a.source, a.ckpt, a.img);
    Shape in = zm.input;
    in[0] = batches.empty() ? 1 : batches[0];
    m = CompiledModel::from_cell(
        *zm.net, {Tensor::empty(in)},
        {.batches = batches,
         .source = "zoo:" + a.source + (a.ckpt.empty() ? " (initial weights)" : "+" + a.ckpt),
         .device = target});
    if (out.empty()) out = a.source + ".spore";
  }
  m.save(out);
  const double s = std::chrono::duration<double>(clk::now() - t0).count();
  std::string bs;
  for (int64_t b : m.batches()) bs += (bs.empty() ? "" : ",") + std::to_string(b);
  std::printf("compiled %s to %s (batch %s, for the %s) in %.2f s\n", a.source.c_str(), out.c_str(),
              bs.c_str(), m.device().c_str(), s);
  return 0;
}

int info(const std::string& path) {
  const CompiledModel m = CompiledModel::load(path);
  std::printf("%s\n%s", path.c_str(), m.summary().c_str());
  return 0;
}

}  // namespace spore::cli
