// The compiled model file (`.spore`, docs/deploy.md): optimised graphs (after every Graph-mode
// pass) with their weights, in a versioned, self-describing binary that loads without tracing or
// running a pass. The public face is spore/deploy.h (CompiledModel); this is the format itself.
//
// Layout (little-endian):
//   header (64 bytes)  magic "SPOREMDL", format version, header size, file size, the meta and
//                      weight sections' offsets and sizes, the meta section's CRC-32, the header's
//                      own CRC-32 (of its first 60 bytes)
//   meta section       producer, source, target device and requirements, the kernel choices
//                      timed at compile time (Backend::kernel_choices), the weights' checksum, the
//                      op-name table, the model's inputs and outputs, the weight table and the
//                      graphs (one per compiled batch size), each followed by its memory plan
//                      (format 2: the arena's size and every planned value's offset, checked by
//                      memory_plan_error when read); format 3 marks every value and arena as on
//                      the host or on the target device (a model compiled for a GPU holds its
//                      weights, activations and kernels there); every count and length is bounded
//                      by the bytes left, every reference by what was defined before it
//   weights section    the constant tensors' bytes (after folding and packing: the kernels'
//   layout),
//                      each at a 64-byte aligned offset, shared by the graphs
// Any malformed file is an IOError naming the file and the field (tests/graph/model_file_test.cpp
// truncates at every field boundary; tests/fuzz/fuzz_model_file.cpp fuzzes the reader).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/memory_plan.h"

namespace spore::graph {

inline constexpr char kModelMagic[8] = {'S', 'P', 'O', 'R', 'E', 'M', 'D', 'L'};
inline constexpr uint32_t kModelFormatVersion = 3;  // written
inline constexpr uint32_t kModelFormatOldest = 1;   // read: 1 has no stored memory plans
inline constexpr uint32_t kModelHeaderBytes = 64;

struct ModelIO {
  std::string name;
  Shape shape;  // -1: the dynamic batch dimension (dim 0)
  DType dtype = kFloat32;
};

// One compiled signature: the graph for inputs whose dim 0 is `batch`.
struct ModelVariant {
  int64_t batch = 0;
  std::shared_ptr<Graph> graph;
  // The memory plan read from the file (checked); null for a format-1 file (planned at load).
  // write_model_file plans each graph itself.
  std::shared_ptr<const MemoryPlan> plan;
};

struct ModelFile {
  uint32_t format_version = kModelFormatVersion;  // the file's (read_model_file sets it)
  std::string producer;                           // "spore 0.1.0"
  std::string source;          // "onnx:resnet18.onnx", "zoo:lenet+lenet.safetensors", ...
  std::string device = "CPU";  // the target: "CPU", "GPU", "Ascend" (device_type_name)
  Device target{};  // that target's device the graphs' values are on (its device 0 when read)
  std::string requirements;    // the CPU target the kernels' layouts were chosen for, or "any"
  std::string kernel_choices;  // Backend::kernel_choices after a warm-up run at compile time
  std::vector<ModelIO> inputs, outputs;
  std::vector<ModelVariant> variants;  // ascending batch
  size_t weight_bytes = 0;             // filled by read/write: the weights section's size
  size_t num_weights = 0;
};

// Serialises m (graphs' placeholders, constants and captured tensors; identical weights are
// stored once). Throws NotImplemented naming the node for what the format cannot hold.
std::string write_model_file(const ModelFile& m);
// Parses and checks bytes (`where` names the file in errors); the graphs are verified (every node
// re-inferred) before they are returned. The weights are copied out of `data`, unless `owner` is
// given: then they stay where they are (a mapped file), and the graphs' constants keep `owner`
// alive.
ModelFile read_model_file(const void* data, size_t size, const std::string& where,
                          std::shared_ptr<const void> owner = nullptr);
// The weights section's checksum (the meta section's weights_hash64 field); exported for the
// fuzz target, which rewrites it over mutated weights so the fuzzer reaches what follows. Formats 1
// and 2 hash differently (2: in chunks, on the threads).
uint64_t model_weights_hash(const void* data, size_t size, uint32_t version = kModelFormatVersion);
// True when the bytes start with the magic number.
bool is_model_file(const void* data, size_t size);
// The CPU target the running machine's kernels choose layouts for ("AVX3", "AVX2", ...).
std::string host_requirements();
// The requirements of a model with no layout chosen for a vector width: it loads on any CPU.
inline constexpr const char* kAnyTarget = "any";

}  // namespace spore::graph
