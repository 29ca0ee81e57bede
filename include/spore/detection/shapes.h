// A generated detection data set in COCO's layout, so detection training and evaluation run on any
// machine (`spore data make-shapes`):
//
//   DIR/train2017/000000000001.jpg ...         JPEG images
//   DIR/val2017/...
//   DIR/annotations/instances_train2017.json   COCO instances (images, annotations, categories)
//   DIR/annotations/instances_val2017.json
//
// Eight shape classes (circle, rectangle, triangle, diamond, star, cross, ring, hexagon) in random
// colours, sizes from 10 px to about half the image (COCO's small, medium and large), rotations and
// limited overlaps, on gradient backgrounds with noise and distractor lines; some images hold a
// cluster of tiny shapes annotated as one crowd box (iscrowd 1). Boxes are the tight boxes of the
// drawn pixels, "area" their pixel count. Images are S on the longer side, some not square. The
// output depends only on the seed (each image has its own generator), not on the thread count.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace spore::detection {

struct ShapesOptions {
  int64_t train = 8000;  // training images
  int64_t val = 1000;    // validation images
  int64_t size = 320;    // longer image side in pixels
  uint64_t seed = 0;
  int64_t max_objects = 7;   // per image (at least one)
  double crowd_prob = 0.08;  // chance that an image holds a crowd cluster
  int jpeg_quality = 90;
};
struct ShapesSummary {
  int64_t images = 0, annotations = 0, crowd = 0;
  int64_t small = 0, medium = 0, large = 0;  // non-crowd boxes by COCO area range (pixel count)
};

// Writes the data set into dir (created if missing; existing files of the same names are replaced).
ShapesSummary make_shapes_dataset(const std::string& dir, const ShapesOptions& opts = {});
// The class names, in category-id order (ids 1..8).
const std::vector<std::string>& shapes_class_names();

}  // namespace spore::detection
