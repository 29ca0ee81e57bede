// numpy-style printing: str() gives what numpy's str(array) gives (e.g. "[[1.  2.5]\n [3.  4. ]]"),
// with summarisation ("...") past 1000 elements. operator<< adds nothing else.
#include <cmath>
#include <cstdio>
#include <sstream>

#include "spore/tensor.h"

namespace spore {
namespace {

constexpr int64_t kThreshold = 1000, kEdge = 3;

struct Formatter {
  bool floating = false, boolean = false, sci = false;
  int decimals = 0;
  size_t width = 0;

  std::string fmt(double v) const {
    char buf[64];
    if (boolean) return v != 0 ? "True" : "False";
    if (!floating) {
      std::snprintf(buf, sizeof buf, "%lld", (long long)v);
      return buf;
    }
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    if (sci) {
      std::snprintf(buf, sizeof buf, "%.*e", std::max(decimals, 1), v);
      return buf;
    }
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    std::string s = buf;
    if (decimals == 0) return s + ".";
    // numpy pads trailing zeros with spaces: "2.5 " next to "2.25"
    const size_t keep = s.find_last_not_of('0');  // the '.' itself at worst
    return s.substr(0, keep + 1) + std::string(s.size() - keep - 1, ' ');
  }
};

// Digits after the point needed to show v exactly at 8 significant decimals (numpy's default).
int needed_decimals(double v) {
  for (int d = 0; d < 8; ++d) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", d, v);
    if (std::fabs(std::strtod(buf, nullptr) - v) <= 1e-8 * std::max(1.0, std::fabs(v))) return d;
  }
  return 8;
}

void print_rec(std::ostringstream& os, const std::vector<double>& vals, const Shape& shape,
               size_t dim, int64_t offset, const Shape& strides, const Formatter& f, bool summarize,
               int indent) {
  if (dim == shape.size()) {
    std::string s = f.fmt(vals[size_t(offset)]);
    if (s.size() < f.width) s = std::string(f.width - s.size(), ' ') + s;
    os << s;
    return;
  }
  os << "[";
  const int64_t n = shape[dim];
  const bool cut = summarize && n > 2 * kEdge;
  for (int64_t i = 0; i < n; ++i) {
    if (cut && i == kEdge) {
      if (dim + 1 == shape.size())
        os << " ...";
      else
        os << std::string(shape.size() - dim - 1, '\n') << std::string(size_t(indent + 1), ' ')
           << "...";
      i = n - kEdge - 1;
      continue;
    }
    if (i > 0) {
      if (dim + 1 == shape.size())
        os << " ";
      else
        os << std::string(shape.size() - dim - 1, '\n') << std::string(size_t(indent + 1), ' ');
    }
    print_rec(os, vals, shape, dim + 1, offset + i * strides[dim], strides, f, summarize,
              indent + 1);
  }
  os << "]";
}

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  if (is_symbolic())
    return "Tensor(symbolic, shape=" + shape_str(shape()) + ", dtype=" + dtype_name(dtype()) + ")";
  std::vector<double> vals = to_vector<double>();
  Formatter f;
  f.floating = is_floating(dtype());
  f.boolean = dtype() == kBool;
  const bool summarize = numel() > kThreshold;
  if (f.floating) {
    double max_abs = 0, min_abs = INFINITY;
    for (double v : vals) {
      if (!std::isfinite(v)) continue;
      max_abs = std::max(max_abs, std::fabs(v));
      if (v != 0) min_abs = std::min(min_abs, std::fabs(v));
    }
    f.sci = max_abs >= 1e8 || (min_abs < 1e-4 && min_abs != INFINITY) ||
            (min_abs != INFINITY && max_abs / min_abs > 1e3 && min_abs < 1e-3);
    for (double v : vals)
      if (std::isfinite(v)) f.decimals = std::max(f.decimals, needed_decimals(v));
    if (f.sci) f.decimals = std::min(std::max(f.decimals, 1), 8);
  }
  for (double v : vals) f.width = std::max(f.width, f.fmt(v).size());
  std::ostringstream os;
  if (dim() == 0) return f.fmt(vals[0]);
  print_rec(os, vals, shape(), 0, 0, contiguous_strides(shape()), f, summarize, 0);
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace spore
