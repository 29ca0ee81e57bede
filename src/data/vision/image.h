// Internal helpers shared by the vision transforms: checking an image tensor, wrapping it as a
// cv::Mat without a copy, allocating outputs, per-channel fill values and 2x3 affine maths.
// Only src/data/vision/*.cpp include this (it pulls in OpenCV, which stays private to libspore).
#pragma once
#include <opencv2/core.hpp>
#include <string>
#include <vector>

#include "spore/data/vision.h"
#include "spore/tensor.h"

namespace spore::vision::detail {

// An image tensor made contiguous, with its (H, W, C) and whether it had the C dim.
struct Image {
  Tensor t;  // contiguous (H, W, C) or (H, W)
  int64_t h = 0, w = 0, c = 0;
  bool has_c = true;
  DType dtype() const { return t.dtype(); }
};

// Checks rank 2 or 3 (HWC) and, when cv_types, dtype uint8 or float32; `op` names the transform.
Image image_of(const Tensor& x, const char* op, bool cv_types = true);
// A new contiguous image of the same dtype/layout convention as `like`, size (h, w, c).
Tensor new_image(const Image& like, int64_t h, int64_t w, int64_t c);
Tensor new_image(const Image& like, int64_t h, int64_t w);  // same channels
// cv::Mat header on a contiguous (H, W[, C]) uint8 / float32 tensor's storage (no copy).
cv::Mat as_mat(const Tensor& t);
int cv_type(DType dt, int64_t channels);
int cv_inter(Inter inter);
// One fill value per channel (a single value is repeated), checked against c.
std::vector<double> fill_per_channel(const std::vector<double>& fill, int64_t c, const char* op);
cv::Scalar fill_scalar(const std::vector<double>& fill, int64_t c, const char* op);
// Sizes {s} or {h, w} (positive) -> {h, w}; `op` names the transform.
std::pair<int64_t, int64_t> size_hw(const std::vector<int64_t>& size, const char* op);
// Output size of Resize(size) for an (h, w) image: {s} -> shorter side s (the longer one
// truncated, torchvision), {h, w} as given.
std::pair<int64_t, int64_t> resize_target(int64_t h, int64_t w, const std::vector<int64_t>& size,
                                          const char* op);
// Crops rows [top, top + h) and columns [left, left + w) (inside the image) into a new tensor.
Tensor crop(const Image& img, int64_t top, int64_t left, int64_t h, int64_t w);
// Pads left/top/right/bottom (each >= 0) in the given mode; any dtype, any channel count.
Tensor pad(const Image& img, int64_t left, int64_t top, int64_t right, int64_t bottom,
           const std::vector<double>& fill, Border mode, const char* op);
// Per-channel fill values as one pixel of dtype dt (c * itemsize bytes).
std::vector<char> fill_pixel(const std::vector<double>& fill, int64_t c, DType dt, const char* op);
// crop (top, left, h, w) of img resized to (oh, ow), without copying the crop first.
Tensor crop_resize(const Image& img, int64_t top, int64_t left, int64_t h, int64_t w, int64_t oh,
                   int64_t ow, Inter inter);
// torchvision RandomResizedCrop.get_params on an (ih, iw) image, drawing from data::sample_rng().
struct CropBox {
  int64_t top, left, h, w;
};
CropBox random_resized_crop_box(int64_t ih, int64_t iw, double s0, double s1, double r0, double r1);
void check_rrc_params(const std::vector<double>& scale, const std::vector<double>& ratio,
                      const char* op);
// cv::resize into a new tensor of (h, w).
Tensor resize(const Image& img, int64_t h, int64_t w, Inter inter);
// cv::warpAffine with a forward 2x3 matrix (src -> dst pixel-index coordinates).
Tensor warp_affine(const Image& img, const cv::Matx23d& m, int64_t out_h, int64_t out_w,
                   Inter inter, const std::vector<double>& fill, const char* op);
// Composition and inversion helpers: a 2x3 matrix as 3x3 with last row (0, 0, 1).
cv::Matx33d to33(const cv::Matx23d& m);
cv::Matx23d to23(const cv::Matx33d& m);
// Pixel-index <-> pixel-corner coordinates: a pixel-index map p' = A p + b maps corners as
// q' = A q + b + 0.5 (1 - A 1), i.e. shift by half a pixel before and after.
cv::Matx23d index_to_corner(const cv::Matx23d& m);
// cos / sin of an angle in degrees, exact for multiples of 90.
std::pair<double, double> cos_sin_deg(double degrees);

}  // namespace spore::vision::detail
