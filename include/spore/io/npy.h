// NumPy .npy files (format versions 1-3): one array, little-endian, C order. What `spore infer`
// reads and writes; np.load / np.save on the other side.
//   Tensor x = io::load_npy("x.npy");
//   io::save_npy(y, "y.npy");
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

// The .npy decoder over bytes in memory (`where` names the source in errors).
Tensor parse_npy(const std::string& bytes, const std::string& where);
std::string encode_npy(const Tensor& t);

}  // namespace spore::io
