// File helpers for the file-backed sources (ImageFolder, COCO, CIFAR, CSV): reading a whole file
// into a uint8 tensor, listing a folder, path joins. Every failure is a spore::Error (IOError)
// naming the source and the path.
#pragma once
#include <string>
#include <vector>

#include "spore/tensor.h"

namespace spore::data::detail {

std::string join_path(const std::string& dir, const std::string& name);
bool is_file(const std::string& path);
bool is_dir(const std::string& path);
// The whole file as a 1-d uint8 tensor (nbytes,). who: "ImageFolderDataset", ...
Tensor read_file_bytes(const std::string& path, const char* who);
// The whole file as a string.
std::string read_file_string(const std::string& path, const char* who);
// Names (not paths) in dir, sorted; dirs_only / files_only filter; names starting with '.' skipped.
std::vector<std::string> list_dir(const std::string& dir, bool dirs, const char* who);

}  // namespace spore::data::detail

namespace spore::data::detail {
// An image file: its bytes (uint8 (nbytes,)), or decoded by vision::Decode (uint8 (H, W, 3)).
Tensor load_image(const std::string& path, bool decode, const char* who);
}  // namespace spore::data::detail
