// NumPy .npy files (format versions 1-3): one array, little-endian, C order, and .npz archives (a
// zip of .npy members, stored or deflated, as np.savez / np.savez_compressed write them; read and
// written with libzip). What `spore infer` reads and writes; np.load / np.save on the other side.
//   Tensor x = io::load_npy("x.npy");
//   io::save_npy(y, "y.npy");
//   NamedArrays in = io::load_npz("inputs.npz");      // [("input", x), ...], in archive order
//   io::save_npz({{"output", y}}, "outputs.npz");
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "spore/tensor.h"

namespace spore::io {

// dtypes: <f4 <f8 <f2 |i1 |u1 <i2 <u2 (widened to int32) <i4 <i8 |b1 (and '=' / '<' byte orders).
// Every malformed header, unsupported dtype, Fortran order or short data is an IOError naming
// the file and the field.
Tensor load_npy(const std::string& path);
void save_npy(const Tensor& t, const std::string& path);

// An .npz archive's arrays by name (the member name without ".npy"), in archive order. A file that
// is not a zip archive, a member that is not a .npy file, an encrypted member or a duplicate name
// is an IOError naming the file and the member.
using NamedArrays = std::vector<std::pair<std::string, Tensor>>;
NamedArrays load_npz(const std::string& path);
// compressed: deflate the members (np.savez_compressed) instead of storing them (np.savez).
void save_npz(const NamedArrays& arrays, const std::string& path, bool compressed = false);

// The .npy decoder over bytes in memory (`where` names the source in errors).
Tensor parse_npy(const std::string& bytes, const std::string& where);
std::string encode_npy(const Tensor& t);

}  // namespace spore::io
