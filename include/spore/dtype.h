// Element types, their sizes and names, and type promotion. The promotion rules
// (numpy/PyTorch-like):
//   bool < uint8 < int8 < int32 < int64 < float16 < bfloat16 < float32 < float64 along a lattice
//   where
//   - any float beats any integer or bool: int64 + float16 -> float16;
//   - float16 + bfloat16 -> float32 (neither holds the other);
//   - uint8 + int8 -> int32 (neither holds the other), otherwise the wider integer;
//   - a Python-style scalar does not promote a tensor of the same category (see ops::scalar rules).
#pragma once
#include <cstdint>
#include <cstring>
#include <string>

namespace spore {

enum class DType : uint8_t { Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
inline constexpr int kNumDTypes = 9;

inline constexpr DType kBool = DType::Bool, kUInt8 = DType::UInt8, kInt8 = DType::Int8,
                       kInt32 = DType::Int32, kInt64 = DType::Int64, kFloat16 = DType::Float16,
                       kBFloat16 = DType::BFloat16, kFloat32 = DType::Float32,
                       kFloat64 = DType::Float64;

size_t itemsize(DType t);
const char* dtype_name(DType t);  // "float32", ...
bool is_floating(DType t);
bool is_integral(DType t);  // true for ints, false for bool and floats
DType promote_types(DType a, DType b);
DType dtype_from_name(const std::string& name);  // accepts "float32", "fp32", "f32", "Float32"...

// IEEE half and bfloat16 storage types; arithmetic goes through float.
struct Half {
  uint16_t bits = 0;
  Half() = default;
  Half(float f);  // NOLINT: implicit like a builtin
  operator float() const;
};
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  BFloat16(float f) {  // round to nearest even
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = uint16_t((u >> 16) | 0x40);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = uint16_t(u >> 16);
    }
  }
  operator float() const {
    uint32_t u = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);
inline Half::Half(float f) : bits(float_to_half(f)) {}
inline Half::operator float() const { return half_to_float(bits); }

template <typename T>
struct dtype_of;
template <>
struct dtype_of<bool> {
  static constexpr DType value = kBool;
};
template <>
struct dtype_of<uint8_t> {
  static constexpr DType value = kUInt8;
};
template <>
struct dtype_of<int8_t> {
  static constexpr DType value = kInt8;
};
template <>
struct dtype_of<int32_t> {
  static constexpr DType value = kInt32;
};
template <>
struct dtype_of<int64_t> {
  static constexpr DType value = kInt64;
};
template <>
struct dtype_of<Half> {
  static constexpr DType value = kFloat16;
};
template <>
struct dtype_of<BFloat16> {
  static constexpr DType value = kBFloat16;
};
template <>
struct dtype_of<float> {
  static constexpr DType value = kFloat32;
};
template <>
struct dtype_of<double> {
  static constexpr DType value = kFloat64;
};
template <typename T>
inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Calls f(T{}) with T the C++ type of dtype t: SPORE_DISPATCH-style type switch.
template <typename F>
decltype(auto) visit_dtype(DType t, F&& f) {
  switch (t) {
    case DType::Bool:
      return f(bool{});
    case DType::UInt8:
      return f(uint8_t{});
    case DType::Int8:
      return f(int8_t{});
    case DType::Int32:
      return f(int32_t{});
    case DType::Int64:
      return f(int64_t{});
    case DType::Float16:
      return f(Half{});
    case DType::BFloat16:
      return f(BFloat16{});
    case DType::Float32:
      return f(float{});
    case DType::Float64:
      return f(double{});
  }
  return f(float{});
}

}  // namespace spore
