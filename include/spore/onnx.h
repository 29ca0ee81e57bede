// ONNX interop (src/onnx/, docs/interop.md).
//
// Export: the network is traced in Graph mode (inference, set_train(false)) into Spore's IR and
// each IR node is written as ONNX nodes (opset 17), parameters as initializers, with a dynamic
// batch dimension "N" on the input and output:
//   spore::export_onnx(*net, spore::randn({1, 1, 28, 28}), "lenet.onnx");
//
// Import: an ONNX model is read (every length and index checked) and run by a function that calls
// Spore's ops for each ONNX node; in Graph mode (the default) that function is traced by jit into
// the IR and runs through the usual passes and executor, one compiled graph per input shape:
//   auto m = spore::OnnxModel::load("lenet.onnx");
//   std::vector<Tensor> y = m.run({x});
// An ONNX op Spore has no mapping for is an error "unsupported ONNX op X" (NotImplemented).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/tensor.h"

namespace spore {

struct OnnxExportOptions {
  int64_t opset = 17;
  bool dynamic_batch = true;  // dim 0 of the input and output is the symbolic "N"
  std::string input_name = "input";
  std::string output_name = "output";
  std::string graph_name = "spore";
};

// Traces net on a tensor shaped like `example` (its values are not used) and writes path.
// Throws NotImplemented naming the op when the traced graph holds an op with no ONNX mapping.
void export_onnx(nn::Cell& net, const Tensor& example, const std::string& path,
                 const OnnxExportOptions& opts = {});

struct OnnxValueInfo {
  std::string name;
  std::vector<int64_t> shape;  // -1 for a symbolic dimension
  std::string dim_names;       // comma-separated symbolic names ("N,,," ), for messages
  DType dtype = kFloat32;
  // ONNX's name of the element type ("FLOAT", "INT16", ...). It differs from dtype's where Spore
  // has no dtype of its own for it; such a value is refused as a graph input or output.
  std::string onnx_type = "FLOAT";
};

class OnnxModel {
 public:
  // Reads and checks the file (IOError naming the file and the field when malformed).
  static OnnxModel load(const std::string& path);
  const std::vector<OnnxValueInfo>& inputs() const;  // graph inputs that are not initializers
  const std::vector<OnnxValueInfo>& outputs() const;
  // The ONNX ops this model uses that Spore cannot run (empty when it can run them all).
  std::vector<std::string> unsupported_ops() const;
  // Runs the model. graph_mode: traced and compiled (cached per input shapes); otherwise op by op.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs, bool graph_mode = true);
  // The op types the model's graph uses, in order of first use.
  std::vector<std::string> op_types() const;
  // Every ONNX op type the importer maps (sorted).
  static std::vector<std::string> supported_ops();

  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
};

// A serialized ONNX TensorProto file (the .pb inputs and outputs of the ONNX test data).
Tensor load_onnx_tensor(const std::string& path);

}  // namespace spore
