// Checkpoints in two formats: safetensors (Spore's own, readable by Hugging Face's `safetensors`
// package) and MindSpore's .ckpt (a protobuf Checkpoint message; docs/interop.md). Loading picks
// the format by the file's content; saving by the path's extension (".ckpt": MindSpore) unless a
// format is given.
// safetensors:
//   8 bytes: N, the header length, little-endian uint64
//   N bytes: a JSON object {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [b, e]},
//            ..., "__metadata__": {"key": "value"}}, padded with spaces to a multiple of 8
//   then the tensors' raw little-endian bytes, back to back, offsets relative to this point.
// Saving is atomic (temp file, fsync, rename), so a crash or error keeps the previous file.
//   io::save_checkpoint(net->parameters_and_buffers(), "lenet.safetensors", {{"epoch", "5"}});
//   auto ckpt = io::load_checkpoint("lenet.safetensors");
//   auto report = io::load_param_into_net(*net, ckpt);   // in place; report.missing, ...
#pragma once
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "spore/nn/cell.h"
#include "spore/tensor.h"

namespace spore::io {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using Metadata = std::map<std::string, std::string>;

enum class CheckpointFormat {
  Auto,         // saving: by extension (".ckpt" is MindSpore, anything else safetensors)
  SafeTensors,  // .safetensors
  MindSpore,    // MindSpore's .ckpt (protobuf)
};
const char* format_name(CheckpointFormat f);  // "safetensors", "MindSpore .ckpt", "auto"
// The format Auto resolves to when saving to path.
CheckpointFormat format_for_path(const std::string& path);

struct Checkpoint {
  NamedTensors tensors;  // in file data order (the order they were saved in)
  Metadata metadata;     // the header's "__metadata__" (string values); empty for .ckpt files
  CheckpointFormat format = CheckpointFormat::SafeTensors;  // what the file was
  const Tensor* find(const std::string& name) const;        // nullptr when absent
};

// Writes tensors (any dtype, any strides; CPU) and metadata to path, atomically. Names must be
// unique, non-empty and not "__metadata__". Throws spore::Error (IOError) on failure, leaving
// any previous file at path untouched. A MindSpore .ckpt has no place for metadata: it is not
// written there. Tensors over 512 MiB are split across consecutive entries as MindSpore does.
void save_checkpoint(const NamedTensors& tensors, const std::string& path,
                     const Metadata& metadata = {},
                     CheckpointFormat format = CheckpointFormat::Auto);
inline void save_checkpoint(const nn::Cell& net, const std::string& path,
                            const Metadata& metadata = {},
                            CheckpointFormat format = CheckpointFormat::Auto) {
  save_checkpoint(net.parameters_and_buffers(), path, metadata, format);
}

// Reads and validates a whole file, safetensors or MindSpore .ckpt, told apart by content (not by
// extension); every malformed case is an IOError naming the file and the field. A .ckpt saved
// with crc_check=True has its CRC verified; an encrypted one (enc_key) is refused.
Checkpoint load_checkpoint(const std::string& path);
// Which format the file at path holds, from its first bytes; throws IOError when neither.
CheckpointFormat detect_checkpoint_format(const std::string& path);

struct LoadReport {
  std::vector<std::string> missing;     // in the net, not in the checkpoint
  std::vector<std::string> unexpected;  // in the checkpoint, not in the net
  std::vector<std::string> mismatched;  // "name: expected (3, 4), found (4, 3)" (or the dtypes)
  bool ok() const { return missing.empty() && unexpected.empty() && mismatched.empty(); }
  std::string str() const;  // all problems, one per line; "" when ok
  // One line for messages: "2 missing (in the net, not in the checkpoint): conv1.weight, fc3.bias;
  // 10 unexpected (...): moments.* (10)". Names sharing a first component are grouped ("moments.*")
  // once more than max_names would be listed. "" when ok.
  std::string summary(size_t max_names = 6) const;
};

// Names grouped for a one-line message: up to max_names names; beyond that names are grouped by
// their first dotted component ("moments.* (10)"), and the tail is "... and N more".
std::string summarize_names(const std::vector<std::string>& names, size_t max_names = 6);

// Copies each loaded tensor into the target of the same name IN PLACE (into its storage, cast
// when dtypes differ), so optimizers holding the targets keep working. Shape mismatches are
// skipped and reported. strict: throws (ValueError) listing every problem, before copying anything.
LoadReport load_into_tensors(const NamedTensors& targets, const NamedTensors& loaded,
                             bool strict = false);
inline LoadReport load_param_into_net(nn::Cell& net, const NamedTensors& loaded,
                                      bool strict = false) {
  return load_into_tensors(net.parameters_and_buffers(), loaded, strict);
}
inline LoadReport load_param_into_net(nn::Cell& net, const Checkpoint& ckpt, bool strict = false) {
  return load_param_into_net(net, ckpt.tensors, strict);
}

// safetensors dtype codes: "F32", "F64", "F16", "BF16", "I8", "U8", "I32", "I64", "BOOL".
const char* safetensors_dtype(DType t);
bool dtype_from_safetensors(const std::string& code, DType* out);  // false when unknown

}  // namespace spore::io
