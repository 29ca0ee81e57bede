// spore::vision: image transforms for Dataset.map (mindspore.dataset.vision's role), on OpenCV and
// libjpeg-turbo. Every transform is a data::TensorOp on one image, so it is also callable directly:
//   Tensor img = vision::Decode()(jpeg_bytes);                       // (H, W, 3) uint8 RGB
//   Tensor x = vision::Compose({vision::RandomResizedCrop({224, 224}),
//                               vision::RandomHorizontalFlip()})(img);
// Conventions:
// - Images are HWC tensors (H, W, C) of uint8 or float32 (a rank-2 (H, W) image is accepted as one
//   channel and keeps rank 2). Geometric transforms keep the dtype; Normalize outputs float32.
// - Sizes are {h, w}; a single value {s} means "the shorter side becomes s, keeping the aspect"
//   for Resize and "square s x s" for crops (MindSpore's int size).
// - Random transforms draw only from data::sample_rng(), which the pipeline seeds per sample, so a
//   pipeline's output does not depend on the number of workers. Seed it yourself
//   (data::sample_rng().seed(s)) to call a random transform reproducibly outside a pipeline.
// - Batch transforms (MixUp, CutMix) and detection transforms (Letterbox, ...WithBBox, Mosaic) act
//   on a whole row; they are RowFn = std::function<data::Row(const data::Row&)>.
// - Boxes are float32 (K, 4) [x, y, w, h] in pixel-corner coordinates (x = 0 is the left edge of
//   the first pixel, x = W its right edge), COCO's convention.
// The basic Rescale / HWC2CHW / Normalize(mean, std) live in spore/data/dataset.h.
// To add a transform: declare it here, implement it in src/data/vision/<family>.cpp, test it in
// tests/data/vision_<family>_test.cpp.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "spore/data/dataset.h"

namespace spore::vision {

using RowFn = std::function<data::Row(const data::Row&)>;  // same type as data::RowOp

enum class Inter { Linear, Nearest, Cubic, Area, Lanczos };
enum class Border { Constant, Edge, Reflect, Symmetric };  // numpy pad modes
enum class ImageBatchFormat { NHWC, NCHW };

// -- decode (decode.cpp) -----------------------------------------------------------------------
// JPEG / PNG (and whatever else OpenCV reads) bytes, a 1-d uint8 tensor -> (H, W, 3) uint8 RGB.
// Corrupt or truncated data is a spore::Error saying so (JPEG warnings such as "premature end of
// data" are errors too: a half-gray image would be a silently wrong sample).
data::TensorOp Decode();
// Fused decode + resize to {h, w} (DVPP's counterpart): a JPEG is decoded by libjpeg-turbo at the
// smallest DCT scale (1/8, 1/4, 1/2, 1) whose output still covers the target in both dims, then
// resized exactly with OpenCV. Other formats fall back to Decode + Resize.
data::TensorOp DecodeResize(std::vector<int64_t> size, Inter interpolation = Inter::Linear);
// RandomResizedCrop fused with the decode (MindSpore's RandomCropDecodeResize): the crop is drawn
// on the JPEG header's size with the same draws as RandomResizedCrop, the image is decoded at the
// smallest DCT scale whose crop still covers the target, then cropped and resized. With the same
// seed it matches Decode + RandomResizedCrop up to resampling (the crop edges snap to the scaled
// pixel grid). Other formats: Decode + RandomResizedCrop.
data::TensorOp RandomCropDecodeResize(std::vector<int64_t> size,
                                      std::vector<double> scale = {0.08, 1.0},
                                      std::vector<double> ratio = {3.0 / 4, 4.0 / 3},
                                      Inter interpolation = Inter::Linear);
// Encodes an (H, W, C) uint8 RGB (or (H, W, 1) / (H, W) gray) image: ext ".jpg" or ".png".
// Returns the bytes as a 1-d uint8 tensor. For tests, tools and writing datasets.
Tensor encode_image(const Tensor& image, const std::string& ext = ".jpg", int jpeg_quality = 95);
// True when the bytes start with the JPEG SOI marker.
bool is_jpeg(const Tensor& bytes);

// -- geometry (geometry.cpp) -------------------------------------------------------------------
data::TensorOp Resize(std::vector<int64_t> size, Inter interpolation = Inter::Linear);
// Center crop; a crop larger than the image pads with 0 (torchvision). Offset floor((H - h) / 2).
data::TensorOp CenterCrop(std::vector<int64_t> size);
// padding: {} | {all} | {left/right, top/bottom} | {left, top, right, bottom} (torchvision).
// fill: one value or one per channel (Constant mode).
struct RandomCropOptions {
  std::vector<int64_t> padding = {};
  bool pad_if_needed = false;
  std::vector<double> fill = {0};
  Border padding_mode = Border::Constant;
};
data::TensorOp RandomCrop(std::vector<int64_t> size, RandomCropOptions opts = {});
// torchvision's RandomResizedCrop: up to 10 tries for an area fraction in `scale` and a log-uniform
// aspect ratio in `ratio`, falling back to a center crop of the clamped ratio; then Resize.
data::TensorOp RandomResizedCrop(std::vector<int64_t> size, std::vector<double> scale = {0.08, 1.0},
                                 std::vector<double> ratio = {3.0 / 4, 4.0 / 3},
                                 Inter interpolation = Inter::Linear);
data::TensorOp RandomHorizontalFlip(double prob = 0.5);
data::TensorOp RandomVerticalFlip(double prob = 0.5);
data::TensorOp HorizontalFlip();
data::TensorOp VerticalFlip();
data::TensorOp Pad(std::vector<int64_t> padding, std::vector<double> fill = {0},
                   Border padding_mode = Border::Constant);
// Counter-clockwise rotation by `degrees` about `center` ({x, y} in pixel-index coordinates;
// default the image center ((W - 1) / 2, (H - 1) / 2)). expand: grow the output to hold the whole
// rotated image. Multiples of 90 degrees are exact (no interpolation error).
data::TensorOp Rotate(double degrees, Inter resample = Inter::Nearest, bool expand = false,
                      std::vector<double> center = {}, std::vector<double> fill = {0});
// torchvision's RandomAffine: angle ~ U(degrees), translation ~ round(U(+-translate * size)),
// scale ~ U(scale), shear x ~ U(shear[0..1]) (and y ~ U(shear[2..3]) when 4 values), about the
// center. degrees {d} means {-d, d}; shear {s} means {-s, s}; empty scale/shear: none.
struct AffineOptions {
  std::vector<double> degrees = {0};
  std::vector<double> translate = {};  // {fx, fy} fractions of W and H
  std::vector<double> scale = {};      // {lo, hi}
  std::vector<double> shear = {};      // degrees
  Inter resample = Inter::Nearest;
  std::vector<double> fill = {0};
};
data::TensorOp RandomAffine(AffineOptions opts);
// MindSpore CutOut: num_patches squares of side `length`, each fully inside the image (clipped
// when length exceeds a side), set to fill. Draws y then x per patch.
data::TensorOp CutOut(int64_t length, int64_t num_patches = 1, std::vector<double> fill = {0});

// -- color and values (color.cpp) ---------------------------------------------------------------
enum class ColorConversion {
  RGB2GRAY,
  BGR2GRAY,
  GRAY2RGB,
  GRAY2BGR,
  RGB2BGR,
  BGR2RGB,
  RGB2HSV,
  HSV2RGB,
  BGR2HSV,
  HSV2BGR,
  RGBA2RGB,
  RGB2RGBA,
  BGRA2BGR,
  BGR2BGRA,
  RGBA2BGR,
  BGR2RGBA
};
data::TensorOp ConvertColor(ColorConversion conversion);
// torchvision ColorJitter semantics: factors b ~ U(max(0, 1 - brightness), 1 + brightness), same
// for contrast and saturation, hue shift ~ U(-hue, hue) (hue <= 0.5), applied in a random order
// (a permutation drawn first, then the four factors). Ranges may be given as {lo, hi} instead.
// Values are kept in float between steps and clamped to [0, 255] (uint8) or [0, 1] (float32)
// after each; uint8 output is rounded to nearest. A factor of exactly 1 (hue 0) skips its step.
data::TensorOp RandomColorAdjust(std::vector<double> brightness = {0},
                                 std::vector<double> contrast = {0},
                                 std::vector<double> saturation = {0},
                                 std::vector<double> hue = {0});
// Deterministic versions of the RandomColorAdjust steps (factor 1 / shift 0 is the identity).
data::TensorOp AdjustBrightness(double factor);
data::TensorOp AdjustContrast(double factor);
data::TensorOp AdjustSaturation(double factor);
data::TensorOp AdjustHue(double shift);  // in turns, [-0.5, 0.5]
// (x - mean) / std per channel, as float32; is_hwc picks the channel axis: last (H, W, C) or
// first (C, H, W). Accepts any numeric input (uint8 straight from Decode).
data::TensorOp Normalize(std::vector<double> mean, std::vector<double> std, bool is_hwc);

// -- generic transforms (compose.cpp) ---------------------------------------------------------
data::TensorOp TypeCast(DType dtype);
// Integer class ids (any shape S) -> float32 (S..., num_classes); smoothing spreads `smoothing`
// of the mass evenly (label smoothing). Ids outside [0, num_classes) are an error.
data::TensorOp OneHot(int64_t num_classes, double smoothing = 0);
data::TensorOp Compose(std::vector<data::TensorOp> transforms);
data::TensorOp RandomApply(std::vector<data::TensorOp> transforms, double prob = 0.5);
data::TensorOp RandomChoice(std::vector<data::TensorOp> transforms);
// Draws from Beta(a, b) with data::sample_rng() (MixUp / CutMix use it).
double sample_beta(double a, double b);

// Batch ops on a row {images (N, H, W, C) or (N, C, H, W), one-hot labels (N, K)} (+ other
// columns passed through). Images come out float32, labels float32.
// MixUp: lambda ~ Beta(alpha, alpha), a random permutation p; x = lam x + (1 - lam) x[p], same for
// labels.
RowFn MixUp(double alpha = 1.0);
// CutMix: per image, with probability prob: lambda ~ Beta(alpha, alpha), a box of area
// (1 - lambda) H W at a uniform center (clipped) is pasted from image p[i]; labels are mixed by the
// pasted area's actual fraction.
RowFn CutMix(double alpha = 1.0, double prob = 1.0,
             ImageBatchFormat format = ImageBatchFormat::NHWC);

// -- detection (bbox.cpp) ----------------------------------------------------------------------
// Rows {image (H, W, C), bboxes float32 (K, 4) [x, y, w, h], per-box columns...}. Columns after
// bboxes whose dim 0 is K (labels, iscrowd) follow the boxes when boxes are dropped; other columns
// pass through unchanged.
// Resize keeping the aspect (scale min(h / H, w / W)), then pad to {h, w} with `fill`, image
// centered (YOLOv5 letterbox); boxes scaled and shifted. scaleup = false never enlarges.
RowFn Letterbox(std::vector<int64_t> size, double fill = 114, bool scaleup = true);
RowFn RandomHorizontalFlipWithBBox(double prob = 0.5);
// YOLOv5's random_perspective without perspective: rotation U(+-degrees), scale U(1 +- scale),
// shear U(+-shear) degrees on both axes, translation U(0.5 +- translate) of the output size,
// about the image center; output size = input size (or `size`). Boxes: the 4 corners are mapped,
// the enclosing box clipped to the image, and kept only when w and h > min_wh pixels, the area
// kept > min_area_ratio of the (scaled) original and the aspect ratio < max_aspect.
struct AffineBBoxOptions {
  double degrees = 0, translate = 0.1, scale = 0.5, shear = 0;
  double fill = 114;
  std::vector<int64_t> size = {};  // {h, w}; default the input size
  double min_wh = 2, min_area_ratio = 0.1, max_aspect = 100;
};
RowFn RandomAffineWithBBox(AffineBBoxOptions opts = {});
// Mosaic (YOLOv5): four samples on a (2s, 2s) canvas filled with `fill`, meeting at a random
// center (xc, yc) ~ U(s/2, 3s/2): sample 0 is top-left of the center, 1 top-right, 2 bottom-left,
// 3 bottom-right, each placed unscaled (resize them first, e.g. Letterbox({s, s})) and cropped by
// the canvas. Boxes are shifted, clipped to the visible part of their tile, and dropped when
// their clipped width or height is < 1 pixel. Output: {canvas, bboxes, per-box columns...}.
// The RowFn takes the four samples flattened into one row: {img0, boxes0, extra0..., img1, ...}
// (4 groups of the same column count). mosaic() takes them as four rows.
RowFn Mosaic(int64_t size, double fill = 114);
data::Row mosaic(const std::vector<data::Row>& samples, int64_t size, double fill = 114);

}  // namespace spore::vision
