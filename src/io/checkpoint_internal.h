// Internals shared by the checkpoint readers and writers (checkpoint.cpp: safetensors, the atomic
// writer and format detection; mindspore_checkpoint.cpp: MindSpore's .ckpt), and test hooks.
#pragma once
#include <cstddef>
#include <functional>
#include <string>

#include "spore/io/checkpoint.h"

namespace spore::io::detail {

// Test hook: simulate a failure at one stage of save_checkpoint, so tests can check that a
// failed save removes its temp file and leaves the previous file intact.
enum class SaveFault { None, AfterHeader, BeforeRename };
void set_save_fault(SaveFault f);  // applies to the next save_checkpoint only

// Writes path atomically: `body` emits the bytes through the function it is given; they go to
// <path>.tmp.<pid>, which is fsynced and renamed over path. Any failure removes the temp file,
// leaves path untouched and throws IOError saying why (full disk, read-only folder...).
void write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& body);

// A tensor name as the formats need it: valid UTF-8 (safetensors' header is JSON; a .ckpt tag is a
// protobuf string). printable_name shows invalid bytes as \xNN for messages.
bool is_utf8(const std::string& s);
std::string printable_name(const std::string& s);

// MindSpore .ckpt (mindspore_checkpoint.cpp).
bool looks_like_mindspore(const unsigned char* head, size_t n);  // from the first n (<= 9) bytes
void save_mindspore_checkpoint(const NamedTensors& tensors, const std::string& path);
Checkpoint load_mindspore_checkpoint(const std::string& path);

}  // namespace spore::io::detail
