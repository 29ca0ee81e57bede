// The lean build's stand-ins (cmake/lean.cmake): every public function of the files the lean build
// leaves out (they need OpenCV or Cairo) is defined here, throwing an error that names the lean
// build, so every program links and only a call to one of them fails. Keep in step with those
// files.
#include <string>
#include <utility>
#include <vector>

#include "data/vision/image.h"
#include "spore/data/vision.h"
#include "spore/detection/detection.h"
#include "spore/detection/shapes.h"
#include "spore/error.h"
#include "spore/io/plot.h"

namespace spore {
namespace {
[[noreturn]] void lean(const char* what, const char* needs = "OpenCV") {
  SPORE_THROW(ErrorKind::NotImplemented, what, " needs ", needs,
              ", which this lean build (SPORE_LEAN, for the GPU machine's bundle) leaves out; use "
              "a full build");
}
}  // namespace

namespace vision {
// geometry.cpp
data::TensorOp CenterCrop(std::vector<int64_t>) { lean("vision::CenterCrop"); }
data::TensorOp RandomCrop(std::vector<int64_t>, RandomCropOptions) { lean("vision::RandomCrop"); }
data::TensorOp RandomAffine(AffineOptions) { lean("vision::RandomAffine"); }
data::TensorOp VerticalFlip() { lean("vision::VerticalFlip"); }
data::TensorOp HorizontalFlip() { lean("vision::HorizontalFlip"); }
data::TensorOp RandomResizedCrop(std::vector<int64_t>, std::vector<double>, std::vector<double>,
                                 Inter) {
  lean("vision::RandomResizedCrop");
}
data::TensorOp RandomVerticalFlip(double) { lean("vision::RandomVerticalFlip"); }
data::TensorOp RandomHorizontalFlip(double) { lean("vision::RandomHorizontalFlip"); }
data::TensorOp Pad(std::vector<int64_t>, std::vector<double>, Border) { lean("vision::Pad"); }
data::TensorOp CutOut(int64_t, int64_t, std::vector<double>) { lean("vision::CutOut"); }
data::TensorOp Resize(std::vector<int64_t>, Inter) { lean("vision::Resize"); }
data::TensorOp Rotate(double, Inter, bool, std::vector<double>, std::vector<double>) {
  lean("vision::Rotate");
}
// color.cpp
data::TensorOp ConvertColor(ColorConversion) { lean("vision::ConvertColor"); }
data::TensorOp AdjustContrast(double) { lean("vision::AdjustContrast"); }
data::TensorOp AdjustBrightness(double) { lean("vision::AdjustBrightness"); }
data::TensorOp AdjustSaturation(double) { lean("vision::AdjustSaturation"); }
data::TensorOp AdjustHue(double) { lean("vision::AdjustHue"); }
data::TensorOp RandomColorAdjust(std::vector<double>, std::vector<double>, std::vector<double>,
                                 std::vector<double>) {
  lean("vision::RandomColorAdjust");
}
data::TensorOp Normalize(std::vector<double>, std::vector<double>, bool) {
  lean("vision::Normalize");
}
// decode.cpp
data::TensorOp Decode() { lean("vision::Decode"); }
data::TensorOp DecodeResize(std::vector<int64_t>, Inter) { lean("vision::DecodeResize"); }
data::TensorOp RandomCropDecodeResize(std::vector<int64_t>, std::vector<double>,
                                      std::vector<double>, Inter) {
  lean("vision::RandomCropDecodeResize");
}
Tensor encode_image(const Tensor&, const std::string&, int) { lean("vision::encode_image"); }
bool is_jpeg(const Tensor&) { lean("vision::is_jpeg"); }

// image.cpp and geometry.cpp's helpers (bbox.cpp calls them).
namespace detail {
Image image_of(const Tensor&, const char*, bool) { lean("vision (image_of)"); }
Tensor new_image(const Image&, int64_t, int64_t, int64_t) { lean("vision (new_image)"); }
Tensor new_image(const Image&, int64_t, int64_t) { lean("vision (new_image)"); }
cv::Mat as_mat(const Tensor&) { lean("vision (as_mat)"); }
int cv_type(DType, int64_t) { lean("vision (cv_type)"); }
int cv_inter(Inter) { lean("vision (cv_inter)"); }
std::vector<double> fill_per_channel(const std::vector<double>&, int64_t, const char*) {
  lean("vision (fill)");
}
cv::Scalar fill_scalar(const std::vector<double>&, int64_t, const char*) { lean("vision (fill)"); }
std::pair<int64_t, int64_t> size_hw(const std::vector<int64_t>&, const char*) {
  lean("vision (size_hw)");
}
std::pair<int64_t, int64_t> resize_target(int64_t, int64_t, const std::vector<int64_t>&,
                                          const char*) {
  lean("vision (resize_target)");
}
Tensor crop(const Image&, int64_t, int64_t, int64_t, int64_t) { lean("vision (crop)"); }
Tensor pad(const Image&, int64_t, int64_t, int64_t, int64_t, const std::vector<double>&, Border,
           const char*) {
  lean("vision (pad)");
}
std::vector<char> fill_pixel(const std::vector<double>&, int64_t, DType, const char*) {
  lean("vision (fill)");
}
Tensor crop_resize(const Image&, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, Inter) {
  lean("vision (crop_resize)");
}
CropBox random_resized_crop_box(int64_t, int64_t, double, double, double, double) {
  lean("vision (crop box)");
}
void check_rrc_params(const std::vector<double>&, const std::vector<double>&, const char*) {
  lean("vision (RandomResizedCrop)");
}
Tensor resize(const Image&, int64_t, int64_t, Inter) { lean("vision (resize)"); }
Tensor warp_affine(const Image&, const cv::Matx23d&, int64_t, int64_t, Inter,
                   const std::vector<double>&, const char*) {
  lean("vision (warp_affine)");
}
cv::Matx33d to33(const cv::Matx23d&) { lean("vision (affine)"); }
cv::Matx23d to23(const cv::Matx33d&) { lean("vision (affine)"); }
cv::Matx23d index_to_corner(const cv::Matx23d&) { lean("vision (affine)"); }
std::pair<double, double> cos_sin_deg(double) { lean("vision (affine)"); }
}  // namespace detail
}  // namespace vision

namespace io {  // plot.cpp
void save_training_curves(const std::string& path, const TrainingCurves&) {
  lean(("the training-curves PNG (" + path + "; the numbers are in metrics.jsonl)").c_str(),
       "Cairo");
}
TrainingCurves curves_from_metrics(const std::vector<MetricValues>&, const std::string&) {
  lean("io::curves_from_metrics", "Cairo");
}
}  // namespace io

namespace detection {  // draw.cpp, shapes.cpp
Tensor read_image(const std::string&) { lean("detection::read_image"); }
void write_image(const std::string&, const Tensor&) { lean("detection::write_image"); }
Tensor draw_detections(const Tensor&, const Tensor&, const std::vector<std::string>&) {
  lean("detection::draw_detections");
}
ShapesSummary make_shapes_dataset(const std::string&, const ShapesOptions&) {
  lean("detection::make_shapes_dataset");
}
const std::vector<std::string>& shapes_class_names() { lean("detection::shapes_class_names"); }
}  // namespace detection

}  // namespace spore
