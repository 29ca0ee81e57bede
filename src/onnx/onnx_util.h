// Shared by the ONNX exporter and importer: dtype codes, tensors <-> TensorProto, file reading.
// TensorProto parsing treats its input as hostile: the data's length is checked against the dims
// before any byte is read, and every failure names the tensor and the field.
#pragma once
#include <string>

#include "onnx/onnx.pb.h"
#include "spore/tensor.h"

namespace spore::onnx_detail {

// ONNX TensorProto.DataType for a Spore dtype.
int onnx_dtype(DType t);
// Spore's dtype for an ONNX data type; false when Spore has none (string, complex, uint16...).
// Int16/UInt16 widen to int32 and UInt32/UInt64 to int64 (`widened` says so).
bool dtype_from_onnx(int code, DType* out, bool* widened = nullptr);
std::string onnx_dtype_name(int code);  // "FLOAT", "INT64", ...

// A CPU tensor as an initializer (raw_data, little-endian).
void to_tensor_proto(const Tensor& t, const std::string& name, ::onnx::TensorProto* out);
// A TensorProto (raw_data or the typed repeated fields) as a tensor. `where` prefixes errors
// ("[onnx] model.onnx: initializer \"w\": "). External data is refused.
Tensor from_tensor_proto(const ::onnx::TensorProto& p, const std::string& where);

// Reads a whole file (IOError naming it).
std::string read_file(const std::string& path, const char* who);

}  // namespace spore::onnx_detail
