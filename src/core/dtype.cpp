// DType tables, promotion lattice and IEEE half conversion.
#include "spore/dtype.h"

#include <algorithm>
#include <cctype>

#include "spore/error.h"

namespace spore {

size_t itemsize(DType t) {
  static constexpr size_t sizes[] = {1, 1, 1, 4, 8, 2, 2, 4, 8};
  return sizes[int(t)];
}
const char* dtype_name(DType t) {
  static constexpr const char* names[] = {"bool",    "uint8",    "int8",    "int32",  "int64",
                                          "float16", "bfloat16", "float32", "float64"};
  return names[int(t)];
}
bool is_floating(DType t) { return t >= DType::Float16; }
bool is_integral(DType t) { return t >= DType::UInt8 && t <= DType::Int64; }

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (a > b) std::swap(a, b);  // now a < b in enum order
  if (a == kFloat16 && b == kBFloat16) return kFloat32;
  if (a == kUInt8 && b == kInt8) return kInt32;
  return b;  // enum order is the lattice order for every other pair
}

DType dtype_from_name(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::tolower(c); });
  struct Alias {
    const char* name;
    DType t;
  };
  static constexpr Alias aliases[] = {
      {"bool", kBool},     {"uint8", kUInt8},     {"u8", kUInt8},     {"int8", kInt8},
      {"i8", kInt8},       {"int32", kInt32},     {"i32", kInt32},    {"int", kInt32},
      {"int64", kInt64},   {"i64", kInt64},       {"long", kInt64},   {"float16", kFloat16},
      {"fp16", kFloat16},  {"f16", kFloat16},     {"half", kFloat16}, {"bfloat16", kBFloat16},
      {"bf16", kBFloat16}, {"float32", kFloat32}, {"fp32", kFloat32}, {"f32", kFloat32},
      {"float", kFloat32}, {"float64", kFloat64}, {"fp64", kFloat64}, {"f64", kFloat64},
      {"double", kFloat64}};
  for (const auto& a : aliases)
    if (n == a.name) return a.t;
  SPORE_THROW(
      ErrorKind::TypeError, "unknown dtype '", name,
      "'; expected one of bool, uint8, int8, int32, int64, float16, bfloat16, float32, float64");
}

float half_to_float(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
  if (exp == 0) {
    if (man == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while (!(man & 0x400)) {
        man <<= 1;
        --exp;
      }
      man &= 0x3ff;
      u = sign | (exp << 23) | (man << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (man << 13);
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t sign = (u >> 16) & 0x8000, abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return uint16_t(sign | 0x7e00);   // NaN
  if (abs >= 0x477ff000u) return uint16_t(sign | 0x7c00);  // overflow -> inf (after rounding)
  if (abs < 0x38800000u) {                                 // subnormal or zero in half
    if (abs < 0x33000000u) return uint16_t(sign);          // rounds to zero
    uint32_t exp = abs >> 23, man = (abs & 0x7fffff) | 0x800000;
    int shift = 126 - int(exp);  // half subnormal = round(value * 2^24) = man >> shift
    uint32_t r = man >> shift, rem = man & ((1u << shift) - 1), halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (r & 1))) ++r;  // nearest even
    return uint16_t(sign | r);
  }
  uint32_t r = abs + 0xfffu + ((abs >> 13) & 1);  // round mantissa to 10 bits, nearest even
  return uint16_t(sign | ((r - 0x38000000u) >> 13));
}

}  // namespace spore
