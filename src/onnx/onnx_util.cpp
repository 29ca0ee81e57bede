// dtype codes and TensorProto <-> Tensor (onnx_util.h).
#include "onnx/onnx_util.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "core/tensor_util.h"

namespace spore::onnx_detail {

using P = ::onnx::TensorProto;

int onnx_dtype(DType t) {
  switch (t) {
    case kFloat32:
      return P::FLOAT;
    case kFloat64:
      return P::DOUBLE;
    case kFloat16:
      return P::FLOAT16;
    case kBFloat16:
      return P::BFLOAT16;
    case kInt8:
      return P::INT8;
    case kUInt8:
      return P::UINT8;
    case kInt32:
      return P::INT32;
    case kInt64:
      return P::INT64;
    case kBool:
      return P::BOOL;
  }
  return P::UNDEFINED;
}

bool dtype_from_onnx(int code, DType* out, bool* widened) {
  bool w = false;
  switch (code) {
    case P::FLOAT:
      *out = kFloat32;
      break;
    case P::DOUBLE:
      *out = kFloat64;
      break;
    case P::FLOAT16:
      *out = kFloat16;
      break;
    case P::BFLOAT16:
      *out = kBFloat16;
      break;
    case P::INT8:
      *out = kInt8;
      break;
    case P::UINT8:
      *out = kUInt8;
      break;
    case P::INT32:
      *out = kInt32;
      break;
    case P::INT64:
      *out = kInt64;
      break;
    case P::BOOL:
      *out = kBool;
      break;
    case P::INT16:
    case P::UINT16:
      *out = kInt32, w = true;
      break;
    case P::UINT32:
    case P::UINT64:
      *out = kInt64, w = true;
      break;
    default:
      return false;
  }
  if (widened) *widened = w;
  return true;
}

std::string onnx_dtype_name(int code) {
  if (P::DataType_IsValid(code)) return P::DataType_Name(P::DataType(code));
  return "unknown data type " + std::to_string(code);
}

void to_tensor_proto(const Tensor& t, const std::string& name, P* out) {
  const Tensor c = spore::detail::contiguous_copy(t);
  out->set_name(name);
  out->set_data_type(onnx_dtype(c.dtype()));
  for (int64_t d : c.shape()) out->add_dims(d);
  out->set_raw_data(c.data_ptr(), c.nbytes());
}

namespace {

// Element size in raw_data for an ONNX type Spore reads.
size_t raw_size(int code) {
  switch (code) {
    case P::FLOAT:
    case P::INT32:
    case P::UINT32:
      return 4;
    case P::DOUBLE:
    case P::INT64:
    case P::UINT64:
      return 8;
    case P::FLOAT16:
    case P::BFLOAT16:
    case P::INT16:
    case P::UINT16:
      return 2;
    default:
      return 1;  // INT8, UINT8, BOOL
  }
}

// Stores element i (given as a 64-bit integer or a double) into t's buffer.
template <typename T>
void put(Tensor& t, int64_t i, T v) {
  static_cast<T*>(t.data_ptr())[i] = v;
}

}  // namespace

Tensor from_tensor_proto(const P& p, const std::string& where) {
  SPORE_CHECK_KIND(
      ErrorKind::IOError,
      !(p.has_data_location() && p.data_location() == P::EXTERNAL) && p.external_data_size() == 0,
      where,
      "field data_location: the tensor's data is in an external file, which "
      "Spore does not read; save the model with its weights inside (onnx.save_model(..., "
      "save_as_external_data=False))");
  SPORE_CHECK_KIND(ErrorKind::IOError, !p.has_segment(), where,
                   "field segment: segmented tensors are not supported");
  DType dt;
  SPORE_CHECK_KIND(
      ErrorKind::NotImplemented, dtype_from_onnx(p.data_type(), &dt), where,
      "field data_type: ", onnx_dtype_name(p.data_type()),
      " tensors are not supported by Spore (supported: FLOAT, DOUBLE, FLOAT16, BFLOAT16, "
      "INT8, UINT8, INT16, UINT16, INT32, UINT32, INT64, UINT64, BOOL)");
  Shape shape;
  uint64_t numel = 1;
  bool zero = false;
  for (int64_t d : p.dims()) {
    SPORE_CHECK_KIND(ErrorKind::IOError, d >= 0, where, "field dims: negative dimension ", d);
    if (d == 0)
      zero = true;
    else {
      SPORE_CHECK_KIND(ErrorKind::IOError, uint64_t(d) <= (uint64_t(1) << 40) / numel, where,
                       "field dims: ", d, " makes the tensor larger than 2^40 elements");
      numel *= uint64_t(d);
    }
    shape.push_back(d);
  }
  if (zero) numel = 0;
  const int code = p.data_type();
  Tensor t = Tensor::empty(shape, dt);
  const int64_t n = int64_t(numel);
  if (p.has_raw_data()) {
    const std::string& raw = p.raw_data();
    const size_t es = raw_size(code);
    SPORE_CHECK_KIND(ErrorKind::IOError, raw.size() == numel * es, where, "field raw_data: dims ",
                     shape_str(shape), " of ", onnx_dtype_name(code), " need ", numel * es,
                     " bytes, found ", raw.size());
    const auto* src = reinterpret_cast<const unsigned char*>(raw.data());
    if (es == itemsize(dt)) {
      if (!raw.empty()) std::memcpy(t.data_ptr(), src, raw.size());
      if (dt == kBool)
        for (int64_t i = 0; i < n; ++i) static_cast<uint8_t*>(t.data_ptr())[i] = src[i] != 0;
    } else {  // widened integers
      for (int64_t i = 0; i < n; ++i) {
        if (code == P::INT16 || code == P::UINT16) {
          uint16_t v;
          std::memcpy(&v, src + 2 * i, 2);
          put<int32_t>(t, i, code == P::INT16 ? int32_t(int16_t(v)) : int32_t(v));
        } else if (code == P::UINT32) {
          uint32_t v;
          std::memcpy(&v, src + 4 * i, 4);
          put<int64_t>(t, i, int64_t(v));
        } else {
          uint64_t v;
          std::memcpy(&v, src + 8 * i, 8);
          put<int64_t>(t, i, int64_t(v));
        }
      }
    }
    return t;
  }
  // The typed fields (ONNX's rules: which field holds which type).
  auto need = [&](int have, const char* field) {
    SPORE_CHECK_KIND(ErrorKind::IOError, uint64_t(have) == numel, where, "field ", field, ": dims ",
                     shape_str(shape), " need ", numel, " values, found ", have);
  };
  switch (code) {
    case P::FLOAT:
      need(p.float_data_size(), "float_data");
      for (int64_t i = 0; i < n; ++i) put<float>(t, i, p.float_data(int(i)));
      break;
    case P::DOUBLE:
      need(p.double_data_size(), "double_data");
      for (int64_t i = 0; i < n; ++i) put<double>(t, i, p.double_data(int(i)));
      break;
    case P::INT64:
      need(p.int64_data_size(), "int64_data");
      for (int64_t i = 0; i < n; ++i) put<int64_t>(t, i, p.int64_data(int(i)));
      break;
    case P::UINT32:
    case P::UINT64:
      need(p.uint64_data_size(), "uint64_data");
      for (int64_t i = 0; i < n; ++i) put<int64_t>(t, i, int64_t(p.uint64_data(int(i))));
      break;
    default:  // int32_data: INT32, INT16, UINT16, INT8, UINT8, BOOL, FLOAT16 / BFLOAT16 bits
      need(p.int32_data_size(), "int32_data");
      for (int64_t i = 0; i < n; ++i) {
        const int32_t v = p.int32_data(int(i));
        switch (dt) {
          case kInt32:
            put<int32_t>(t, i, v);
            break;
          case kInt8:
            put<int8_t>(t, i, int8_t(v));
            break;
          case kUInt8:
            put<uint8_t>(t, i, uint8_t(v));
            break;
          case kBool:
            put<uint8_t>(t, i, uint8_t(v != 0));
            break;
          default:
            put<uint16_t>(t, i, uint16_t(v));
            break;  // float16 / bfloat16 bits
        }
      }
  }
  return t;
}

std::string read_file(const std::string& path, const char* who) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  SPORE_CHECK_KIND(ErrorKind::IOError, f, "[", who, "] cannot open ", path, ": ",
                   std::strerror(errno));
  struct stat st;
  if (::fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    SPORE_THROW(ErrorKind::IOError, "[", who, "] ", path,
                ": not a regular file (a folder?); expected a file");
  }
  std::string bytes(size_t(st.st_size), '\0');
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
  SPORE_CHECK_KIND(ErrorKind::IOError, got == bytes.size(), "[", who, "] ", path, ": read ", got,
                   " of ", bytes.size(), " bytes");
  return bytes;
}

}  // namespace spore::onnx_detail
