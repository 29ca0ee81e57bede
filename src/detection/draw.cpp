// Reading, drawing on and writing images for detection (spore predict): OpenCV underneath, RGB
// (H, W, 3) uint8 tensors outside, as the data engine's decoded images.
#include <cstring>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include "spore/detection/detection.h"
#include "spore/grad_mode.h"

namespace spore::detection {
namespace {

cv::Scalar class_colour(int64_t c) {  // distinct, stable hues (BGR)
  static const int hues[] = {0, 100, 40, 150, 20, 120, 60, 165, 80, 10};
  cv::Mat hsv(1, 1, CV_8UC3, cv::Scalar(hues[c % 10], 230, 240)), bgr;
  cv::cvtColor(hsv, bgr, cv::COLOR_HSV2BGR);
  const auto v = bgr.at<cv::Vec3b>(0, 0);
  return {double(v[0]), double(v[1]), double(v[2])};
}

}  // namespace

Tensor read_image(const std::string& path) {
  cv::Mat bgr;
  try {
    bgr = cv::imread(path, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    // OpenCV's size check (validateInputImageSize) names its internal macro in an assertion
    // text; say what to set, as vision.Decode does for training data.
    SPORE_CHECK_KIND(ErrorKind::IOError,
                     std::string(e.what()).find("CV_IO_MAX_IMAGE_PIXELS") == std::string::npos,
                     "[detection.read_image] ", path,
                     " claims more pixels than the decoder's limit (2^30 unless "
                     "OPENCV_IO_MAX_IMAGE_PIXELS is set: set it to raise the limit), or its header "
                     "is corrupt");
    SPORE_THROW(ErrorKind::IOError, "[detection.read_image] cannot decode ", path, ": ", e.what());
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, !bgr.empty(),
                   "[detection.read_image] cannot read the image ", path,
                   "; expected an existing JPEG or PNG file");
  Tensor out = Tensor::empty({bgr.rows, bgr.cols, 3}, kUInt8);
  cv::Mat rgb(bgr.rows, bgr.cols, CV_8UC3, out.data_ptr());
  cv::cvtColor(bgr, rgb, cv::COLOR_BGR2RGB);
  return out;
}

void write_image(const std::string& path, const Tensor& image) {
  SPORE_CHECK(
      image.defined() && image.dim() == 3 && image.size(2) == 3 && image.dtype() == kUInt8,
      "[detection.write_image] expected an RGB uint8 image (H, W, 3), got ",
      image.defined() ? shape_str(image.shape()) + " " + dtype_name(image.dtype()) : "undefined");
  const Tensor src = image.contiguous();
  cv::Mat rgb(int(src.size(0)), int(src.size(1)), CV_8UC3, src.data_ptr()), bgr;
  cv::cvtColor(rgb, bgr, cv::COLOR_RGB2BGR);
  bool ok = false;
  try {
    ok = cv::imwrite(path, bgr);
  } catch (const cv::Exception& e) {
    SPORE_THROW(ErrorKind::IOError, "[detection.write_image] cannot write ", path, ": ", e.what(),
                "; use a .jpg or .png file name");
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, ok, "[detection.write_image] cannot write ", path,
                   "; check that the folder exists and the name ends in .jpg or .png");
}

Tensor draw_detections(const Tensor& image, const Tensor& dets,
                       const std::vector<std::string>& names) {
  SPORE_CHECK(image.defined() && image.dim() == 3 && image.size(2) == 3 && image.dtype() == kUInt8,
              "[detection.draw_detections] expected an RGB uint8 image (H, W, 3), got ",
              image.defined() ? shape_str(image.shape()) : "undefined");
  SPORE_CHECK(
      dets.defined() && dets.dim() == 2 && dets.size(1) == 6,
      "[detection.draw_detections] expected detections (n, 6) [x1, y1, x2, y2, score, class], got ",
      dets.defined() ? shape_str(dets.shape()) : "undefined");
  Tensor out = image.contiguous().clone();
  cv::Mat rgb(int(out.size(0)), int(out.size(1)), CV_8UC3, out.data_ptr());
  const std::vector<float> d = dets.to_vector<float>();
  const int thick = std::max(1, int(std::lround(std::max(rgb.rows, rgb.cols) / 320.0)));
  for (size_t i = 0; i + 5 < d.size(); i += 6) {
    const int64_t c = int64_t(d[i + 5]);
    cv::Scalar col = class_colour(c);
    col = cv::Scalar(col[2], col[1], col[0]);  // the image is RGB
    const cv::Point p1(int(std::lround(d[i])), int(std::lround(d[i + 1]))),
        p2(int(std::lround(d[i + 2])), int(std::lround(d[i + 3])));
    cv::rectangle(rgb, p1, p2, col, thick, cv::LINE_AA);
    char label[96];
    const std::string name =
        c >= 0 && size_t(c) < names.size() ? names[size_t(c)] : std::to_string(c);
    std::snprintf(label, sizeof label, "%s %.2f", name.c_str(), double(d[i + 4]));
    int base = 0;
    const double scale = 0.35 * thick;
    const cv::Size ts = cv::getTextSize(label, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &base);
    const int top = std::max(0, p1.y - ts.height - 3);
    cv::rectangle(rgb, cv::Point(p1.x, top), cv::Point(p1.x + ts.width + 2, top + ts.height + 3),
                  col, cv::FILLED);
    cv::putText(rgb, label, cv::Point(p1.x + 1, top + ts.height + 1), cv::FONT_HERSHEY_SIMPLEX,
                scale, cv::Scalar(255, 255, 255), 1, cv::LINE_AA);
  }
  return out;
}

}  // namespace spore::detection
