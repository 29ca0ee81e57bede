// make_shapes_dataset (spore/detection/shapes.h): the generated COCO-layout detection set. Each
// object is drawn into its own mask first, so its box is the tight box of its pixels and its area
// their count; then the mask is painted onto the image. Images are generated in parallel, each from
// its own generator seeded by (seed, split, index), and written as JPEG with OpenCV.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <numbers>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "spore/detection/shapes.h"
#include "spore/error.h"
#include "spore/metrics/coco_eval.h"

namespace spore::detection {
namespace {

namespace fs = std::filesystem;
constexpr double kPi = std::numbers::pi;

class Rng {  // splitmix64: portable, so a seed gives the same data set everywhere
 public:
  explicit Rng(uint64_t s) : s_(s) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform(double lo = 0, double hi = 1) {
    return lo + (hi - lo) * double(next() >> 11) * 0x1.0p-53;
  }
  int64_t randint(int64_t lo, int64_t hi) {
    return lo + int64_t(next() % uint64_t(hi - lo + 1));
  }  // [lo, hi]
  bool chance(double p) { return uniform() < p; }

 private:
  uint64_t s_;
};

enum Shape { kCircle, kRectangle, kTriangle, kDiamond, kStar, kCross, kRing, kHexagon, kNumShapes };

std::vector<cv::Point> polygon(const std::vector<cv::Point2d>& unit, cv::Point2d c, double sx,
                               double sy, double angle) {
  std::vector<cv::Point> pts;
  const double ca = std::cos(angle), sa = std::sin(angle);
  for (const auto& p : unit) {
    const double x = p.x * sx, y = p.y * sy;
    pts.emplace_back(int(std::lround(c.x + x * ca - y * sa)),
                     int(std::lround(c.y + x * sa + y * ca)));
  }
  return pts;
}
std::vector<cv::Point2d> regular(
    int n, double r_inner = 0) {  // n vertices (2n with a star's inner radius)
  std::vector<cv::Point2d> v;
  const int k = r_inner > 0 ? 2 * n : n;
  for (int i = 0; i < k; ++i) {
    const double a = -kPi / 2 + 2 * kPi * i / k, r = (r_inner > 0 && i % 2) ? r_inner : 1.0;
    v.emplace_back(r * std::cos(a), r * std::sin(a));
  }
  return v;
}

// Draws shape `s` of size ~`d` px centred at c into mask (255 inside).
void draw_shape(cv::Mat& mask, Shape s, cv::Point2d c, double d, Rng& rng) {
  const double r = d / 2, tilt = rng.uniform(-0.15, 0.15), spin = rng.uniform(0, 2 * kPi);
  const double aspect = std::exp(rng.uniform(-0.4, 0.4));
  auto fill = [&](const std::vector<cv::Point>& pts) {
    cv::fillPoly(mask, std::vector<std::vector<cv::Point>>{pts}, 255, cv::LINE_8);
  };
  switch (s) {
    case kCircle:
      cv::ellipse(
          mask, cv::Point(int(std::lround(c.x)), int(std::lround(c.y))),
          cv::Size(int(std::lround(r)), int(std::lround(r * std::exp(rng.uniform(-0.12, 0.12))))),
          0, 0, 360, 255, cv::FILLED);
      break;
    case kRectangle:
      fill(polygon({{-1, -1}, {1, -1}, {1, 1}, {-1, 1}}, c, r * std::sqrt(aspect) * 0.85,
                   r / std::sqrt(aspect) * 0.85, tilt));
      break;
    case kTriangle:
      fill(polygon(regular(3), c, r, r, spin));
      break;
    case kDiamond:
      fill(polygon(regular(4), c, r * std::sqrt(aspect), r / std::sqrt(aspect), tilt));
      break;
    case kStar:
      fill(polygon(regular(5, 0.45), c, r, r, spin));
      break;
    case kCross: {
      const double t = rng.uniform(0.25, 0.4);
      fill(polygon({{-1, -t}, {1, -t}, {1, t}, {-1, t}}, c, r, r, tilt));
      fill(polygon({{-t, -1}, {t, -1}, {t, 1}, {-t, 1}}, c, r, r, tilt));
      break;
    }
    case kRing: {
      const cv::Point cc(int(std::lround(c.x)), int(std::lround(c.y)));
      cv::circle(mask, cc, int(std::lround(r)), 255, cv::FILLED);
      cv::circle(mask, cc, std::max(1, int(std::lround(r * rng.uniform(0.45, 0.65)))), 0,
                 cv::FILLED);
      break;
    }
    case kHexagon:
      fill(polygon(regular(6), c, r, r, spin));
      break;
    default:
      break;
  }
}

cv::Vec3b random_colour(Rng& rng) {  // saturated, not too dark (HSV)
  cv::Mat hsv(1, 1, CV_8UC3,
              cv::Scalar(double(rng.randint(0, 179)), double(rng.randint(110, 255)),
                         double(rng.randint(120, 255)))),
      bgr;
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
  return bgr.at<cv::Vec3b>(0, 0);
}
int colour_distance(cv::Vec3b a, cv::Vec3b b) {
  return std::abs(a[0] - b[0]) + std::abs(a[1] - b[1]) + std::abs(a[2] - b[2]);
}

struct Object {
  int64_t cls;  // 0-based
  cv::Rect box;
  int64_t area;
  bool crowd;
};

// One image: returns the BGR pixels and its objects.
cv::Mat make_image(Rng& rng, int64_t S, const ShapesOptions& o, std::vector<Object>& objs) {
  int w = int(S), h = int(S);
  if (rng.chance(0.4))
    (rng.chance(0.5) ? h : w) = int(std::lround(double(S) * rng.uniform(0.65, 1.0)));
  // Background: a linear gradient between two muted colours, noise, a few distractor lines.
  cv::Mat img(h, w, CV_8UC3);
  cv::Vec3b c1, c2;
  for (int k = 0; k < 3; ++k)
    c1[k] = uchar(rng.randint(20, 235)), c2[k] = uchar(rng.randint(20, 235));
  const double ang = rng.uniform(0, 2 * kPi), dx = std::cos(ang), dy = std::sin(ang);
  const double span = std::abs(dx) * w + std::abs(dy) * h;
  const double x0 = dx < 0 ? -dx * w : 0, y0 = dy < 0 ? -dy * h : 0;
  for (int y = 0; y < h; ++y) {
    auto* row = img.ptr<cv::Vec3b>(y);
    for (int x = 0; x < w; ++x) {
      const double t = (x * dx + y * dy + x0 + y0) / span;
      for (int k = 0; k < 3; ++k) {
        const double v = c1[k] * (1 - t) + c2[k] * t + double(int(rng.next() % 17) - 8);
        row[x][k] = cv::saturate_cast<uchar>(v);
      }
    }
  }
  for (int64_t n = rng.randint(0, 3); n > 0; --n) {
    const cv::Vec3b c = random_colour(rng);
    cv::line(img, cv::Point(int(rng.randint(0, w - 1)), int(rng.randint(0, h - 1))),
             cv::Point(int(rng.randint(0, w - 1)), int(rng.randint(0, h - 1))),
             cv::Scalar(c[0], c[1], c[2]), int(rng.randint(1, 2)), cv::LINE_AA);
  }
  cv::Mat mask(h, w, CV_8UC1);
  auto overlaps_too_much = [&](const cv::Rect& b) {
    for (const Object& p : objs) {
      const double inter = double((b & p.box).area());
      if (inter > 0.35 * b.area() || inter > 0.35 * p.box.area()) return true;
    }
    return false;
  };
  auto paint = [&](const cv::Mat& m, cv::Point2d at) {
    const cv::Vec3b bg =
        img.at<cv::Vec3b>(std::clamp(int(at.y), 0, h - 1), std::clamp(int(at.x), 0, w - 1));
    cv::Vec3b c = random_colour(rng);
    for (int k = 0; k < 8 && colour_distance(c, bg) < 150; ++k) c = random_colour(rng);
    img.setTo(cv::Scalar(c[0], c[1], c[2]), m);
  };
  // A crowd: many tiny shapes of one class in a region, annotated as one box.
  if (rng.chance(o.crowd_prob)) {
    mask.setTo(0);
    const Shape s = Shape(rng.randint(0, kNumShapes - 1));
    const int rw = int(rng.randint(36, 90)), rh = int(rng.randint(36, 90));
    const double rx = rng.uniform(0, std::max(1, w - rw)), ry = rng.uniform(0, std::max(1, h - rh));
    for (int64_t n = rng.randint(10, 24); n > 0; --n)
      draw_shape(mask, s, {rx + rng.uniform(4, rw - 4), ry + rng.uniform(4, rh - 4)},
                 rng.uniform(4, 8), rng);
    const cv::Rect box = cv::boundingRect(mask);
    if (box.area() > 0) {
      paint(mask, {rx + rw / 2.0, ry + rh / 2.0});
      objs.push_back({int64_t(s), box, int64_t(cv::countNonZero(mask)), true});
    }
  }
  const int64_t want = rng.randint(1, std::max<int64_t>(1, o.max_objects));
  for (int64_t n = 0, tries = 0; n < want && tries < 60; ++tries) {
    mask.setTo(0);
    const Shape s = Shape(rng.randint(0, kNumShapes - 1));
    const double d = std::exp(rng.uniform(std::log(10.0), std::log(0.55 * double(std::min(w, h)))));
    // Mostly inside the image; some cut by its border.
    const double margin = rng.chance(0.1) ? 0 : d / 2;
    const cv::Point2d c(rng.uniform(margin, w - margin), rng.uniform(margin, h - margin));
    draw_shape(mask, s, c, d, rng);
    const cv::Rect box = cv::boundingRect(mask);
    const int64_t area = cv::countNonZero(mask);
    if (box.width < 3 || box.height < 3 || area < 12 || overlaps_too_much(box)) continue;
    paint(mask, c);
    objs.push_back({int64_t(s), box, area, false});
    ++n;
  }
  return img;
}

uint64_t image_seed(uint64_t seed, int split, int64_t i) {
  Rng r(seed * 0x9E3779B97F4A7C15ull + uint64_t(split) * 0xD1B54A32D192ED03ull + uint64_t(i));
  return r.next();
}

void make_split(const std::string& dir, const std::string& split, int split_id, int64_t n,
                const ShapesOptions& o, ShapesSummary& sum) {
  const fs::path img_dir = fs::path(dir) / (split + "2017");
  std::error_code ec;
  fs::create_directories(img_dir, ec);
  SPORE_CHECK_KIND(ErrorKind::IOError, !ec, "[make_shapes] cannot create ", img_dir.string(), ": ",
                   ec.message(), "; choose another --out folder");
  std::vector<std::vector<Object>> objects(static_cast<size_t>(n));
  std::vector<std::pair<int, int>> sizes(static_cast<size_t>(n));
  std::atomic<int64_t> failed{-1};
#pragma omp parallel for schedule(dynamic, 4)
  for (int64_t i = 0; i < n; ++i) {
    Rng rng(image_seed(o.seed, split_id, i));
    const cv::Mat img = make_image(rng, o.size, o, objects[size_t(i)]);
    sizes[size_t(i)] = {img.rows, img.cols};
    char name[32];
    std::snprintf(name, sizeof name, "%012lld.jpg", (long long)(i + 1));
    bool ok = false;
    try {
      ok = cv::imwrite((img_dir / name).string(), img, {cv::IMWRITE_JPEG_QUALITY, o.jpeg_quality});
    } catch (const cv::Exception&) {
      ok = false;
    }
    if (!ok) {
      int64_t expected = -1;
      failed.compare_exchange_strong(expected, i);
    }
  }
  if (failed >= 0)
    SPORE_THROW(ErrorKind::IOError, "[make_shapes] cannot write image ", failed.load() + 1,
                " into ", img_dir.string(), "; check free disk space and permissions");
  metrics::Coco coco;
  const auto& names = shapes_class_names();
  for (size_t c = 0; c < names.size(); ++c) coco.add_category({int64_t(c) + 1, names[c], "shape"});
  int64_t ann_id = 1;
  for (int64_t i = 0; i < n; ++i) {
    char name[32];
    std::snprintf(name, sizeof name, "%012lld.jpg", (long long)(i + 1));
    coco.add_image({i + 1, name, sizes[size_t(i)].second, sizes[size_t(i)].first});
    for (const Object& ob : objects[size_t(i)]) {
      metrics::CocoAnnotation a;
      a.id = ann_id++;
      a.image_id = i + 1;
      a.category_id = ob.cls + 1;
      a.bbox = {double(ob.box.x), double(ob.box.y), double(ob.box.width), double(ob.box.height)};
      a.area = double(ob.area);
      a.iscrowd = ob.crowd;
      coco.add_annotation(a);
      ++sum.annotations;
      if (ob.crowd) {
        ++sum.crowd;
      } else {
        (ob.area < 32 * 32 ? sum.small : ob.area < 96 * 96 ? sum.medium : sum.large) += 1;
      }
    }
  }
  sum.images += n;
  const fs::path ann_dir = fs::path(dir) / "annotations";
  fs::create_directories(ann_dir, ec);
  SPORE_CHECK_KIND(ErrorKind::IOError, !ec, "[make_shapes] cannot create ", ann_dir.string(), ": ",
                   ec.message());
  coco.save((ann_dir / ("instances_" + split + "2017.json")).string());
}

}  // namespace

const std::vector<std::string>& shapes_class_names() {
  static const std::vector<std::string> names{"circle", "rectangle", "triangle", "diamond",
                                              "star",   "cross",     "ring",     "hexagon"};
  return names;
}

ShapesSummary make_shapes_dataset(const std::string& dir, const ShapesOptions& o) {
  SPORE_CHECK(!dir.empty(), "[make_shapes] the output folder is empty; pass --out DIR");
  SPORE_CHECK(o.train >= 0 && o.val >= 0 && o.train + o.val > 0,
              "[make_shapes] expected train >= 0 and val >= 0 "
              "images, at least one in all; got train ",
              o.train, ", val ", o.val);
  SPORE_CHECK(o.size >= 64 && o.size <= 4096,
              "[make_shapes] expected an image size in [64, 4096], got ", o.size);
  SPORE_CHECK(o.max_objects >= 1 && o.max_objects <= 100,
              "[make_shapes] expected max_objects in [1, 100], got ", o.max_objects);
  SPORE_CHECK(o.crowd_prob >= 0 && o.crowd_prob <= 1,
              "[make_shapes] crowd_prob must be in [0, 1], got ", o.crowd_prob);
  SPORE_CHECK(o.jpeg_quality >= 1 && o.jpeg_quality <= 100,
              "[make_shapes] jpeg_quality must be in [1, 100], got ", o.jpeg_quality);
  ShapesSummary sum;
  if (o.train > 0) make_split(dir, "train", 0, o.train, o, sum);
  if (o.val > 0) make_split(dir, "val", 1, o.val, o, sum);
  return sum;
}

}  // namespace spore::detection
