// Generated COCO evaluation cases (tests/metrics): ground truth with crowd boxes, every area range,
// areas on the range bounds, categories without ground truth and non-contiguous category ids;
// detections near and far from the ground truth with tied scores, IoU exactly on thresholds,
// images with more than 100 detections, empty images and categories the ground truth lacks.
// A portable generator (splitmix64, no <random> distributions), so the cases, and the committed
// pycocotools numbers for them (fixtures/coco_eval_pycocotools.json), are the same on every
// machine.
#pragma once
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "spore/metrics/coco_eval.h"

namespace spore::test {

class SplitMix {
 public:
  explicit SplitMix(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform(); }
  int64_t randint(int64_t lo, int64_t hi) {
    return lo + int64_t(next() % uint64_t(hi - lo + 1));
  }  // [lo, hi]
  bool chance(double p) { return uniform() < p; }

 private:
  uint64_t s_;
};

struct CocoCase {
  std::string name;
  metrics::Coco gt;
  std::vector<metrics::CocoDetection> dets;
};

// Case `n` (0-based) of the generated family. Odd knobs vary with n so the family covers the rules.
inline CocoCase make_coco_case(int n) {
  SplitMix rng(0xC0C0ull * 1000003ull + uint64_t(n));
  CocoCase c;
  c.name = "case" + std::to_string(n);
  const int64_t cat_pool[] = {1, 3, 7, 18, 90};
  const int num_cats = int(rng.randint(1, 5));
  for (int k = 0; k < num_cats; ++k)
    c.gt.add_category({cat_pool[k], "class" + std::to_string(cat_pool[k]), "shape"});
  const int num_imgs = int(rng.randint(1, 14));
  const bool quantised_scores = n % 3 == 0;  // many exact ties
  const bool many_dets = n % 5 == 4;         // > 100 detections on some images
  const double crowd_p = n % 4 == 1 ? 0.3 : 0.08;
  int64_t ann_id = 1;
  auto random_box = [&](double size_scale) {
    // log-uniform sides from 2 to ~300 px cover small, medium and large.
    const double w = std::exp(rng.uniform(std::log(2.0), std::log(300.0 * size_scale)));
    const double h = w * std::exp(rng.uniform(-0.8, 0.8));
    return std::array<double, 4>{rng.uniform(0, 400), rng.uniform(0, 300), w, h};
  };
  auto score = [&]() {
    return quantised_scores ? double(rng.randint(1, 10)) / 10.0 : rng.uniform(0.001, 1.0);
  };
  for (int i = 0; i < num_imgs; ++i) {
    const int64_t img_id =
        1000 + int64_t(n) * 100 + int64_t(i) * 7;  // sparse, unsorted-friendly ids
    c.gt.add_image({img_id, "img" + std::to_string(img_id) + ".jpg", 640, 480});
    const bool empty_gt = rng.chance(0.15);
    const int num_gt = empty_gt ? 0 : int(rng.randint(1, 9));
    std::vector<metrics::CocoAnnotation> gts;
    for (int g = 0; g < num_gt; ++g) {
      metrics::CocoAnnotation a;
      a.id = ann_id++;
      a.image_id = img_id;
      // Categories: the last one (when there are 2+) never gets ground truth.
      a.category_id = cat_pool[rng.randint(0, std::max(0, num_cats - 2))];
      a.bbox = random_box(1.0);
      const double u = rng.uniform();
      if (u < 0.1)
        a.bbox[2] = 32, a.bbox[3] = 32;  // area exactly 32^2: small and medium
      else if (u < 0.2)
        a.bbox[2] = 96, a.bbox[3] = 96;  // exactly 96^2: medium and large
      a.area = a.bbox[2] * a.bbox[3];
      if (rng.chance(0.3))
        a.area *= rng.uniform(0.5, 1.0);  // a segmentation's area, smaller than the box
      a.iscrowd = rng.chance(crowd_p);
      if (a.iscrowd) a.bbox[2] *= 2, a.bbox[3] *= 2, a.area = a.bbox[2] * a.bbox[3];
      gts.push_back(a);
      c.gt.add_annotation(a);
    }
    if (num_gt >= 2 && rng.chance(0.3)) {  // a duplicate box: a det's IoU ties between two gts
      metrics::CocoAnnotation a = gts[0];
      a.id = ann_id++;
      c.gt.add_annotation(a);
      gts.push_back(a);
    }
    // Detections: jittered copies of ground truth (some several times), exact-threshold boxes and
    // random boxes, some in a category without ground truth or unknown to the ground truth.
    if (rng.chance(0.1)) continue;  // an image with no detections
    for (const auto& g : gts) {
      const int copies = int(rng.randint(0, 3));
      for (int r = 0; r < copies; ++r) {
        metrics::CocoDetection d;
        d.image_id = img_id;
        d.category_id = rng.chance(0.85) ? g.category_id : cat_pool[rng.randint(0, num_cats - 1)];
        const double j = rng.uniform(0.0, 0.35);
        d.bbox = {g.bbox[0] + g.bbox[2] * rng.uniform(-j, j),
                  g.bbox[1] + g.bbox[3] * rng.uniform(-j, j), g.bbox[2] * (1 + rng.uniform(-j, j)),
                  g.bbox[3] * (1 + rng.uniform(-j, j))};
        d.score = score();
        c.dets.push_back(d);
      }
      if (rng.chance(0.25)) {  // IoU exactly 0.5 or 0.75: the lower half (or 3/4) of the box
        metrics::CocoDetection d;
        d.image_id = img_id;
        d.category_id = g.category_id;
        const double frac = rng.chance(0.5) ? 0.5 : 0.75;
        d.bbox = {g.bbox[0], g.bbox[1], g.bbox[2], g.bbox[3] * frac};
        d.score = score();
        c.dets.push_back(d);
      }
    }
    const int extra = many_dets && i % 2 == 0 ? int(rng.randint(100, 140)) : int(rng.randint(0, 6));
    for (int r = 0; r < extra; ++r) {
      metrics::CocoDetection d;
      d.image_id = img_id;
      d.category_id = rng.chance(0.05) ? 999 : cat_pool[rng.randint(0, num_cats - 1)];
      if (many_dets && !gts.empty() && rng.chance(0.5)) {
        const auto& g = gts[size_t(rng.randint(0, int64_t(gts.size()) - 1))];
        d.category_id = g.category_id;
        d.bbox = {g.bbox[0] + rng.uniform(-3, 3), g.bbox[1] + rng.uniform(-3, 3), g.bbox[2],
                  g.bbox[3]};
      } else {
        d.bbox = random_box(0.8);
      }
      if (rng.chance(0.05)) d.bbox[2] = 32, d.bbox[3] = 32;  // a detection's area on the bound
      d.score = score();
      c.dets.push_back(d);
    }
  }
  if (c.dets.empty())  // pycocotools' loadRes cannot take an empty list
    c.dets.push_back({c.gt.images()[0].id, 999, {1, 1, 10, 10}, 0.5});
  return c;
}

constexpr int kNumCocoCases = 24;

}  // namespace spore::test
