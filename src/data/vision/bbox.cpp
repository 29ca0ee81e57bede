// Detection transforms: rows {image (H, W, C), bboxes float32 (K, 4) [x, y, w, h], per-box
// columns...} whose boxes move with the pixels: Letterbox, RandomHorizontalFlipWithBBox,
// RandomAffineWithBBox (YOLOv5's random_perspective without perspective, with its box filter) and
// Mosaic. Geometry is done in pixel-corner coordinates (see vision.h) and converted to OpenCV's
// pixel-index coordinates only for the warp, so boxes and pixels agree to the sub-pixel.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/tensor_util.h"
#include "data/vision/image.h"
#include "spore/data/sample_rng.h"

namespace spore::vision {
namespace {
using detail::Image;

struct Box {
  float x, y, w, h;
};

struct Sample {
  Image img;
  std::vector<Box> boxes;
  data::Row row;  // the input row (image and boxes replaced on output)
};

Sample sample_of(const data::Row& row, const char* op) {
  SPORE_CHECK(row.size() >= 2, "[vision.", op, "] expected a row {image, bboxes, ...}, got ",
              row.size(), " column", row.size() == 1 ? "" : "s");
  Sample s{detail::image_of(row[0], op), {}, row};
  const Tensor& b = row[1];
  SPORE_CHECK(b.defined(), "[vision.", op, "] the bboxes column is undefined");
  SPORE_CHECK(b.numel() == 0 || (b.dim() == 2 && b.shape()[1] == 4), "[vision.", op,
              "] expected bboxes of shape (K, 4) [x, y, w, h], got ", shape_str(b.shape()));
  SPORE_CHECK_TYPE(b.dtype() != kBool, "[vision.", op, "] expected numeric bboxes, got bool");
  const Tensor src = spore::detail::contiguous_copy(b);
  s.boxes.resize(size_t(b.numel() / 4));
  spore::detail::convert_elements(src.data_ptr(), src.dtype(), s.boxes.data(), kFloat32, b.numel());
  return s;
}

Tensor boxes_tensor(const std::vector<Box>& boxes) {
  return from_buffer(boxes.data(), {int64_t(boxes.size()), 4}, kFloat32);
}

bool per_box(const Tensor& t, size_t k) {
  return t.defined() && t.dim() >= 1 && t.shape()[0] == int64_t(k);
}

// Rows idx of t along dim 0 (a byte copy).
Tensor select_rows(const Tensor& t, const std::vector<size_t>& idx) {
  const Tensor src = spore::detail::contiguous_copy(t);
  Shape shape = src.shape();
  const size_t row_bytes = shape[0] ? src.nbytes() / size_t(shape[0]) : 0;
  shape[0] = int64_t(idx.size());
  Tensor out = Tensor::empty(shape, src.dtype());
  for (size_t i = 0; i < idx.size(); ++i)
    std::memcpy(static_cast<char*>(out.data_ptr()) + i * row_bytes,
                static_cast<const char*>(src.data_ptr()) + idx[i] * row_bytes, row_bytes);
  return out;
}

// The output row: new image, the boxes kept (indices into the input boxes), per-box columns
// filtered the same way.
data::Row finish(const Sample& s, Tensor image, const std::vector<Box>& boxes,
                 const std::vector<size_t>& kept) {
  data::Row out = s.row;
  out[0] = std::move(image);
  out[1] = boxes_tensor(boxes);
  if (kept.size() != s.boxes.size())
    for (size_t j = 2; j < out.size(); ++j)
      if (per_box(out[j], s.boxes.size())) out[j] = select_rows(out[j], kept);
  return out;
}

std::vector<size_t> all_indices(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// A corner-coordinate affine map as the pixel-index map cv::warpAffine wants.
cv::Matx23d corner_to_index(const cv::Matx23d& m) {
  cv::Matx23d r = m;
  r(0, 2) -= 0.5 * (1 - m(0, 0) - m(0, 1));
  r(1, 2) -= 0.5 * (1 - m(1, 0) - m(1, 1));
  return r;
}

}  // namespace

RowFn Letterbox(std::vector<int64_t> size, double fill, bool scaleup) {
  const auto hw = detail::size_hw(
      size, "Letterbox");  // no structured binding: lambdas capture these (clang 14)
  const int64_t th = hw.first, tw = hw.second;
  return [th, tw, fill, scaleup](const data::Row& row) {
    const Sample s = sample_of(row, "Letterbox");
    double r = std::min(double(th) / double(s.img.h), double(tw) / double(s.img.w));
    if (!scaleup) r = std::min(r, 1.0);
    const int64_t nh = std::clamp<int64_t>(std::llround(double(s.img.h) * r), 1, th);
    const int64_t nw = std::clamp<int64_t>(std::llround(double(s.img.w) * r), 1, tw);
    const Image resized =
        detail::image_of(detail::resize(s.img, nh, nw, Inter::Linear), "Letterbox");
    const int64_t left = (tw - nw) / 2, top = (th - nh) / 2;
    Tensor out = detail::pad(resized, left, top, tw - nw - left, th - nh - top, {fill},
                             Border::Constant, "Letterbox");
    // Per-axis scales: the rounding of (nh, nw) makes them differ slightly from r.
    const float sx = float(nw) / float(s.img.w), sy = float(nh) / float(s.img.h);
    std::vector<Box> boxes = s.boxes;
    for (Box& b : boxes) b = {b.x * sx + float(left), b.y * sy + float(top), b.w * sx, b.h * sy};
    return finish(s, out, boxes, all_indices(boxes.size()));
  };
}

RowFn RandomHorizontalFlipWithBBox(double prob) {
  SPORE_CHECK(prob >= 0 && prob <= 1,
              "[vision.RandomHorizontalFlipWithBBox] prob must be in [0, 1], got ", prob);
  static const data::TensorOp flip = HorizontalFlip();
  return [prob](const data::Row& row) {
    const Sample s = sample_of(row, "RandomHorizontalFlipWithBBox");
    if (!data::sample_rng().bernoulli(prob))
      return finish(s, s.img.t, s.boxes, all_indices(s.boxes.size()));
    std::vector<Box> boxes = s.boxes;
    for (Box& b : boxes) b.x = float(s.img.w) - b.x - b.w;
    return finish(s, flip(s.img.t), boxes, all_indices(boxes.size()));
  };
}

RowFn RandomAffineWithBBox(AffineBBoxOptions o) {
  SPORE_CHECK(o.degrees >= 0 && o.translate >= 0 && o.translate <= 0.5 && o.scale >= 0 &&
                  o.scale < 1 && o.shear >= 0,
              "[vision.RandomAffineWithBBox] expected degrees >= 0, 0 <= translate <= 0.5, "
              "0 <= scale < 1, shear >= 0; got degrees ",
              o.degrees, " translate ", o.translate, " scale ", o.scale, " shear ", o.shear);
  if (!o.size.empty()) detail::size_hw(o.size, "RandomAffineWithBBox");
  return [o](const data::Row& row) {
    const Sample s = sample_of(row, "RandomAffineWithBBox");
    int64_t oh = s.img.h, ow = s.img.w;
    if (!o.size.empty()) std::tie(oh, ow) = detail::size_hw(o.size, "RandomAffineWithBBox");
    auto& rng = data::sample_rng();
    // YOLOv5's draw order: rotation and scale, shear x, shear y, translation x, y.
    const double angle = rng.uniform(-o.degrees, o.degrees);
    const double sc = rng.uniform(1 - o.scale, 1 + o.scale);
    const double shx = std::tan(rng.uniform(-o.shear, o.shear) * M_PI / 180);
    const double shy = std::tan(rng.uniform(-o.shear, o.shear) * M_PI / 180);
    const double tx = rng.uniform(0.5 - o.translate, 0.5 + o.translate) * double(ow);
    const double ty = rng.uniform(0.5 - o.translate, 0.5 + o.translate) * double(oh);
    // M = T S R C in corner coordinates: C moves the image center to the origin, R rotates
    // counter-clockwise and scales, S shears, T moves the origin to (tx, ty).
    const auto [c, sn] = detail::cos_sin_deg(angle);
    const cv::Matx33d C(1, 0, -s.img.w / 2.0, 0, 1, -s.img.h / 2.0, 0, 0, 1);
    const cv::Matx33d R(c * sc, sn * sc, 0, -sn * sc, c * sc, 0, 0, 0, 1);
    const cv::Matx33d S(1, shx, 0, shy, 1, 0, 0, 0, 1);
    const cv::Matx33d T(1, 0, tx, 0, 1, ty, 0, 0, 1);
    const cv::Matx23d m = detail::to23(T * S * R * C);
    Tensor out = detail::warp_affine(s.img, corner_to_index(m), oh, ow, Inter::Linear, {o.fill},
                                     "RandomAffineWithBBox");
    std::vector<Box> boxes;
    std::vector<size_t> kept;
    for (size_t i = 0; i < s.boxes.size(); ++i) {
      const Box& b = s.boxes[i];
      double x0 = 1e300, x1 = -1e300, y0 = 1e300, y1 = -1e300;
      for (double px : {double(b.x), double(b.x) + b.w})
        for (double py : {double(b.y), double(b.y) + b.h}) {
          const double qx = m(0, 0) * px + m(0, 1) * py + m(0, 2);
          const double qy = m(1, 0) * px + m(1, 1) * py + m(1, 2);
          x0 = std::min(x0, qx), x1 = std::max(x1, qx), y0 = std::min(y0, qy),
          y1 = std::max(y1, qy);
        }
      x0 = std::clamp(x0, 0.0, double(ow)), x1 = std::clamp(x1, 0.0, double(ow));
      y0 = std::clamp(y0, 0.0, double(oh)), y1 = std::clamp(y1, 0.0, double(oh));
      const double w2 = x1 - x0, h2 = y1 - y0, eps = 1e-16;
      const double w1 = double(b.w) * sc, h1 = double(b.h) * sc;  // YOLOv5 box_candidates
      const double aspect = std::max(w2 / (h2 + eps), h2 / (w2 + eps));
      if (w2 > o.min_wh && h2 > o.min_wh && w2 * h2 / (w1 * h1 + eps) > o.min_area_ratio &&
          aspect < o.max_aspect) {
        boxes.push_back({float(x0), float(y0), float(w2), float(h2)});
        kept.push_back(i);
      }
    }
    return finish(s, out, boxes, kept);
  };
}

data::Row mosaic(const std::vector<data::Row>& samples, int64_t size, double fill) {
  SPORE_CHECK(size > 0, "[vision.Mosaic] size must be positive, got ", size);
  SPORE_CHECK(samples.size() == 4, "[vision.Mosaic] expected 4 samples, got ", samples.size());
  std::vector<Sample> s;
  for (const data::Row& r : samples) s.push_back(sample_of(r, "Mosaic"));
  for (size_t i = 1; i < 4; ++i) {
    SPORE_CHECK(s[i].row.size() == s[0].row.size(), "[vision.Mosaic] sample ", i, " has ",
                s[i].row.size(), " columns, sample 0 has ", s[0].row.size());
    SPORE_CHECK(s[i].img.c == s[0].img.c && s[i].img.dtype() == s[0].img.dtype(),
                "[vision.Mosaic] sample ", i, " is a ", s[i].img.c, "-channel ",
                dtype_name(s[i].img.dtype()), " image, sample 0 a ", s[0].img.c, "-channel ",
                dtype_name(s[0].img.dtype()), " one");
  }
  const int64_t s2 = 2 * size, c = s[0].img.c;
  auto& rng = data::sample_rng();
  const int64_t xc = int64_t(rng.uniform(size / 2.0, 1.5 * size));
  const int64_t yc = int64_t(rng.uniform(size / 2.0, 1.5 * size));
  // The canvas, filled.
  Tensor canvas = detail::new_image(s[0].img, s2, s2);
  const std::vector<char> fpx = detail::fill_pixel({fill}, c, s[0].img.dtype(), "Mosaic");
  const size_t px = fpx.size();
  char* dst = static_cast<char*>(canvas.data_ptr());
  for (int64_t i = 0; i < s2 * s2; ++i) std::memcpy(dst + size_t(i) * px, fpx.data(), px);

  std::vector<Box> boxes;
  std::vector<std::vector<size_t>> kept(4);
  for (size_t t = 0; t < 4; ++t) {
    const int64_t h = s[t].img.h, w = s[t].img.w;
    int64_t x1a, y1a, x2a, y2a;  // the tile's rectangle on the canvas
    int64_t x1b, y1b;            // its top-left in the source image
    if (t == 0) {
      x1a = std::max<int64_t>(xc - w, 0), y1a = std::max<int64_t>(yc - h, 0), x2a = xc, y2a = yc;
      x1b = w - (x2a - x1a), y1b = h - (y2a - y1a);
    } else if (t == 1) {
      x1a = xc, y1a = std::max<int64_t>(yc - h, 0), x2a = std::min(xc + w, s2), y2a = yc;
      x1b = 0, y1b = h - (y2a - y1a);
    } else if (t == 2) {
      x1a = std::max<int64_t>(xc - w, 0), y1a = yc, x2a = xc, y2a = std::min(s2, yc + h);
      x1b = w - (x2a - x1a), y1b = 0;
    } else {
      x1a = xc, y1a = yc, x2a = std::min(xc + w, s2), y2a = std::min(s2, yc + h);
      x1b = 0, y1b = 0;
    }
    const char* src = static_cast<const char*>(s[t].img.t.data_ptr());
    for (int64_t y = y1a; y < y2a; ++y)
      std::memcpy(dst + size_t(y * s2 + x1a) * px, src + size_t((y - y1a + y1b) * w + x1b) * px,
                  size_t(x2a - x1a) * px);
    const float padw = float(x1a - x1b), padh = float(y1a - y1b);
    for (size_t i = 0; i < s[t].boxes.size(); ++i) {
      const Box& b = s[t].boxes[i];
      const float bx0 = std::clamp(b.x + padw, float(x1a), float(x2a));
      const float bx1 = std::clamp(b.x + b.w + padw, float(x1a), float(x2a));
      const float by0 = std::clamp(b.y + padh, float(y1a), float(y2a));
      const float by1 = std::clamp(b.y + b.h + padh, float(y1a), float(y2a));
      if (bx1 - bx0 >= 1 && by1 - by0 >= 1) {
        boxes.push_back({bx0, by0, bx1 - bx0, by1 - by0});
        kept[t].push_back(i);
      }
    }
  }
  data::Row out = s[0].row;
  out[0] = canvas;
  out[1] = boxes_tensor(boxes);
  for (size_t j = 2; j < out.size(); ++j) {
    // A per-box column in every sample is concatenated over the kept boxes; others come from
    // sample 0.
    bool all_per_box = true;
    for (size_t t = 0; t < 4; ++t)
      all_per_box = all_per_box && per_box(s[t].row[j], s[t].boxes.size()) &&
                    s[t].row[j].dtype() == s[0].row[j].dtype() &&
                    Shape(s[t].row[j].shape().begin() + 1, s[t].row[j].shape().end()) ==
                        Shape(s[0].row[j].shape().begin() + 1, s[0].row[j].shape().end());
    if (!all_per_box) continue;
    std::vector<Tensor> parts;
    int64_t total = 0;
    for (size_t t = 0; t < 4; ++t) {
      parts.push_back(select_rows(s[t].row[j], kept[t]));
      total += int64_t(kept[t].size());
    }
    Shape shape = parts[0].shape();
    shape[0] = total;
    Tensor cat = Tensor::empty(shape, parts[0].dtype());
    size_t off = 0;
    for (const Tensor& p : parts) {
      std::memcpy(static_cast<char*>(cat.data_ptr()) + off, p.data_ptr(), p.nbytes());
      off += p.nbytes();
    }
    out[j] = cat;
  }
  return out;
}

RowFn Mosaic(int64_t size, double fill) {
  SPORE_CHECK(size > 0, "[vision.Mosaic] size must be positive, got ", size);
  return [size, fill](const data::Row& row) {
    SPORE_CHECK(row.size() >= 8 && row.size() % 4 == 0,
                "[vision.Mosaic] expected 4 samples "
                "flattened into one row {img0, boxes0, ..., img1, boxes1, ...}, got ",
                row.size(), " columns (not a multiple of 4, or fewer than 8)");
    const size_t g = row.size() / 4;
    std::vector<data::Row> samples;
    for (size_t t = 0; t < 4; ++t)
      samples.emplace_back(row.begin() + long(t * g), row.begin() + long((t + 1) * g));
    return mosaic(samples, size, fill);
  };
}

}  // namespace spore::vision
