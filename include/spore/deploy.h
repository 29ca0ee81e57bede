// Deployment (src/deploy/, docs/deploy.md): a model compiled once into a `.spore` file (the role
// of CANN's ATC / MindSpore's MINDIR) that later loads and runs without tracing or graph passes.
//
//   // compile: from ONNX, or from a Cell traced with example inputs
//   spore::CompiledModel m = spore::CompiledModel::from_onnx("resnet18.onnx", {.batches = {1,
//   64}}); m.save("resnet18.spore");
//   // deploy
//   auto m2 = spore::CompiledModel::load("resnet18.spore");
//   std::vector<Tensor> y = m2.run({x});           // any thread; serialised on the model
//   spore::InferenceSession s(m2); s.run({x});     // one per thread: runs in parallel
//
// The file holds the graphs after every Graph-mode pass (constant folding, BatchNorm folding,
// oneDNN post-op fusion, blocked layouts, packed and Winograd convolution weights), one graph per
// compiled batch size, and the weights in the layout the kernels read. An input whose dim 0 is
// dynamic (-1) takes any batch: one the file has runs as is, others run as chunks of the compiled
// batches (largest first). The C API over this is spore/spore_c.h.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/tensor.h"

namespace spore {

struct ModelTensorInfo {
  std::string name;
  std::vector<int64_t> shape;  // -1: the dynamic batch dimension
  DType dtype = kFloat32;
};

struct CompileOptions {
  // The batch sizes to compile a graph for. Empty: 1 when the input's batch is dynamic, else the
  // input's own batch.
  std::vector<int64_t> batches;
  std::string source;  // recorded in the file (spore info shows it); default: what it came from
  // The target: the CPU, or a device (GPU 0): the graphs are traced and optimised for that device
  // (its backend's passes) with the weights on it, and the file loads them onto it. A Cell must
  // already be on the device (built under set_device or a DeviceGuard).
  Device device{};
};

class CompiledModel {
 public:
  // Compiles an ONNX model (through the ONNX importer and every Graph-mode pass).
  static CompiledModel from_onnx(const std::string& onnx_path, CompileOptions opts = {});
  // Compiles a Cell's inference forward pass (set_train(false)), traced on inputs shaped like
  // `examples` (their values are not used; their dim 0 is the batch). dynamic_batch: dim 0 of
  // every input and output may vary. Parameters are frozen into the file as constants.
  static CompiledModel from_cell(nn::Cell& net, const std::vector<Tensor>& examples,
                                 CompileOptions opts = {}, bool dynamic_batch = true,
                                 std::vector<std::string> input_names = {},
                                 std::vector<std::string> output_names = {});
  // The same for any function of tensors (the Python front end's Cells come this way).
  static CompiledModel from_function(
      const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
      const std::vector<Tensor>& examples, CompileOptions opts = {}, bool dynamic_batch = true,
      std::vector<std::string> input_names = {}, std::vector<std::string> output_names = {});
  // Reads a .spore file (IOError naming the file and the field when it is malformed).
  static CompiledModel load(const std::string& path);
  static CompiledModel from_buffer(const void* data, size_t size,
                                   const std::string& name = "<memory>");
  static bool is_model_file(const std::string& path);  // starts with the magic number

  void save(const std::string& path) const;
  std::string to_bytes() const;

  const std::vector<ModelTensorInfo>& inputs() const;
  const std::vector<ModelTensorInfo>& outputs() const;
  std::vector<int64_t> batches() const;  // the compiled batch sizes
  std::string producer() const;          // "spore 0.1.0"
  std::string source() const;
  std::string device() const;   // the target: "CPU", "GPU"
  std::string summary() const;  // what `spore info` prints

  // Runs on tensors on the host or on the model's device (ValueError / TypeError naming the input
  // when a shape, dtype or device is wrong); the outputs are on the model's device (a device
  // model's stay there until read: Tensor::to). Calls from several threads are serialised; use
  // one InferenceSession per thread to run in parallel.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;

  struct Impl;
  CompiledModel() = default;  // empty until assigned
  explicit CompiledModel(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  const std::shared_ptr<Impl>& impl() const { return impl_; }

 private:
  std::shared_ptr<Impl> impl_;
};

// A model's run state (its graphs' memory): one per thread; many may share one CompiledModel.
class InferenceSession {
 public:
  explicit InferenceSession(const CompiledModel& model);
  ~InferenceSession();
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  struct State;

 private:
  std::shared_ptr<CompiledModel::Impl> model_;
  std::unique_ptr<State> state_;
};

}  // namespace spore
