// Image decoding: Decode (JPEG through libjpeg-turbo, PNG and the rest through OpenCV), the fused
// DecodeResize (libjpeg-turbo DCT-domain scaling + an exact OpenCV resize, DVPP's counterpart) and
// encode_image. Decoders are strict: libjpeg warnings (a truncated file decodes to a half-gray
// image) are errors, and a PNG without its IEND chunk is reported as truncated.
#include <turbojpeg.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>

#include "core/tensor_util.h"
#include "data/vision/image.h"

namespace spore::vision {
namespace {

struct Bytes {
  Tensor t;  // contiguous 1-d uint8
  const unsigned char* data() const { return static_cast<const unsigned char*>(t.data_ptr()); }
  size_t size() const { return size_t(t.numel()); }
};

Bytes bytes_of(const Tensor& x, const char* op) {
  SPORE_CHECK(x.defined(), "[vision.", op, "] got an undefined tensor");
  SPORE_CHECK_TYPE(x.dtype() == kUInt8 && x.dim() == 1, "[vision.", op,
                   "] expected encoded image bytes (a 1-d uint8 tensor), got ",
                   dtype_name(x.dtype()), " of shape ", shape_str(x.shape()),
                   x.dim() == 3 ? "; the image looks decoded already" : "");
  SPORE_CHECK(x.numel() > 0, "[vision.", op, "] got empty image data (0 bytes)");
  return {spore::detail::contiguous_copy(x)};
}

bool jpeg_magic(const Bytes& b) {
  return b.size() >= 3 && b.data()[0] == 0xFF && b.data()[1] == 0xD8 && b.data()[2] == 0xFF;
}
bool png_magic(const Bytes& b) {
  static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n'};
  return b.size() >= 8 && std::memcmp(b.data(), sig, 8) == 0;
}

// The formats OpenCV decodes for Spore, by their signature; nullptr for anything else. Only these
// reach cv::imdecode: it also tries every other reader it was built with (Debian's has GDAL, DICOM
// through GDCM, JPEG 2000, ...), and some of those abort the process on malformed input (GDCM's
// asserts, found by fuzz_image_decode). A DICOM signature at byte 128 is refused too, as GDCM
// would claim the file before the TIFF / PNM readers do.
const char* cv_format(const Bytes& b) {
  const unsigned char* d = b.data();
  const size_t n = b.size();
  if (n >= 132 && std::memcmp(d + 128, "DICM", 4) == 0) return nullptr;
  if (png_magic(b)) return "PNG";
  if (n >= 2 && d[0] == 'B' && d[1] == 'M') return "BMP";
  if (n >= 4 && ((d[0] == 'I' && d[1] == 'I' && d[2] == 42 && d[3] == 0) ||
                 (d[0] == 'M' && d[1] == 'M' && d[2] == 0 && d[3] == 42)))
    return "TIFF";
  if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0)
    return "WebP";
  if (n >= 3 && d[0] == 'P' && d[1] >= '1' && d[1] <= '6' && std::isspace(d[2])) return "PNM";
  if (jpeg_magic(b)) return "JPEG";  // CMYK / YCCK JPEGs, which libjpeg-turbo cannot make RGB
  return nullptr;
}

// One decompressor per thread (map workers decode in parallel). A handle that saw an error can
// keep stale state (a later header read fails with "Unsupported marker"), so errors replace it.
struct Decompressor {
  tjhandle h = nullptr;
  ~Decompressor() { reset(); }
  void reset() {
    if (h) tjDestroy(h);
    h = nullptr;
  }
};
thread_local Decompressor t_decompressor;

tjhandle decompressor() {
  if (!t_decompressor.h) t_decompressor.h = tjInitDecompress();
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, t_decompressor.h,
                   "[vision.Decode] libjpeg-turbo init failed: ", tjGetErrorStr2(nullptr));
  return t_decompressor.h;
}

// The handle's error message; the handle is dropped (see above).
std::string take_error(tjhandle tj) {
  std::string msg = tjGetErrorStr2(tj);
  t_decompressor.reset();
  return msg;
}

struct JpegInfo {
  int w = 0, h = 0, subsamp = 0, colorspace = 0;
};

JpegInfo jpeg_header(tjhandle tj, const Bytes& b, const char* op) {
  JpegInfo info;
  if (tjDecompressHeader3(tj, b.data(), static_cast<unsigned long>(b.size()), &info.w, &info.h,
                          &info.subsamp, &info.colorspace) != 0)
    SPORE_THROW(ErrorKind::ValueError, "[vision.", op, "] corrupt JPEG header (", b.size(),
                " bytes): ", take_error(tj));
  return info;
}

// The largest image decoded, in pixels: OpenCV's limit (OPENCV_IO_MAX_IMAGE_PIXELS, default 2^30),
// which its PNG / WebP / TIFF decoders apply, applied to the JPEG path too. A header is a few bytes
// and can claim 65535 x 65535 pixels (12 GiB), so the check comes before any allocation.
int64_t max_image_pixels() {
  static const int64_t limit = [] {
    const char* env = std::getenv("OPENCV_IO_MAX_IMAGE_PIXELS");
    char* end = nullptr;
    const long long v = env ? std::strtoll(env, &end, 10) : 0;
    return env && *env && *end == '\0' && v > 0 ? int64_t(v) : int64_t(1) << 30;
  }();
  return limit;
}

// Decodes into an (sh, sw, 3) RGB tensor at scaling factor sf; errors (and warnings) throw.
Tensor jpeg_decode(tjhandle tj, const Bytes& b, const JpegInfo& info, tjscalingfactor sf,
                   const char* op) {
  SPORE_CHECK(int64_t(info.w) * info.h <= max_image_pixels(), "[vision.", op, "] the JPEG is ",
              info.w, "x", info.h, " pixels, more than the decoder's limit of ", max_image_pixels(),
              " (set OPENCV_IO_MAX_IMAGE_PIXELS to raise it), or its header is corrupt");
  const int sw = TJSCALED(info.w, sf), sh = TJSCALED(info.h, sf);
  Tensor out = Tensor::empty({sh, sw, 3}, kUInt8);
  // LIMITSCANS: a progressive JPEG with thousands of scans is rejected instead of taking minutes.
  const int rc = tjDecompress2(tj, b.data(), static_cast<unsigned long>(b.size()),
                               static_cast<unsigned char*>(out.data_ptr()), sw, sw * 3, sh,
                               TJPF_RGB, TJFLAG_STOPONWARNING | TJFLAG_LIMITSCANS);
  if (rc != 0) {
    const bool warning = tjGetErrorCode(tj) == TJERR_WARNING;
    const std::string why = take_error(tj);
    SPORE_THROW(ErrorKind::ValueError, "[vision.", op, "] ",
                warning ? "truncated or damaged JPEG data" : "corrupt JPEG data", " (", b.size(),
                " bytes, ", info.w, "x", info.h, "): ", why);
  }
  return out;
}

// OpenCV's decoders for PNG and the other formats of cv_format(), as RGB.
Tensor cv_decode(const Bytes& b, const char* op) {
  if (!cv_format(b)) {
    std::string head;
    for (size_t i = 0; i < std::min<size_t>(b.size(), 8); ++i) {
      char hex[4];
      std::snprintf(hex, sizeof hex, "%02x", unsigned(b.data()[i]));
      head += (i ? " " : "") + std::string(hex);
    }
    SPORE_THROW(
        ErrorKind::ValueError, "[vision.", op, "] unsupported or corrupt image (", b.size(),
        " bytes, starting ", head.empty() ? "with nothing" : head,
        "): the supported formats are JPEG, PNG, BMP, TIFF, WebP and PNM; convert the file to one");
  }
  if (png_magic(b)) {
    // A PNG ends with the 12-byte IEND chunk; without it the file was cut short.
    static const unsigned char iend[8] = {0, 0, 0, 0, 'I', 'E', 'N', 'D'};
    SPORE_CHECK(b.size() >= 12 + 8 && std::memcmp(b.data() + b.size() - 12, iend, 8) == 0,
                "[vision.", op, "] truncated PNG data (", b.size(),
                " bytes, no IEND chunk at the end)");
  }
  cv::Mat bgr;
  try {
    const cv::Mat raw(1, int(b.size()), CV_8UC1, const_cast<unsigned char*>(b.data()));
    bgr = cv::imdecode(raw, cv::IMREAD_COLOR);
  } catch (const cv::Exception& e) {
    // OpenCV's size check (validateInputImageSize) names its internal macro; say what to set.
    SPORE_CHECK(std::string(e.what()).find("CV_IO_MAX_IMAGE_PIXELS") == std::string::npos,
                "[vision.", op, "] the image (", b.size(),
                " bytes) claims more pixels than the decoder's limit of ", max_image_pixels(),
                " (set OPENCV_IO_MAX_IMAGE_PIXELS to raise it), or its header is corrupt");
    SPORE_THROW(ErrorKind::ValueError, "[vision.", op, "] cannot decode the image (", b.size(),
                " bytes): ", e.what());
  }
  SPORE_CHECK(!bgr.empty(), "[vision.", op, "] cannot decode the image (", b.size(),
              " bytes): ", png_magic(b) ? "corrupt PNG data" : "unknown format or corrupt data",
              " (supported: JPEG, PNG, BMP, TIFF, WebP...)");
  SPORE_ASSERT(bgr.type() == CV_8UC3);
  Tensor out = Tensor::empty({bgr.rows, bgr.cols, 3}, kUInt8);
  cv::Mat dst = detail::as_mat(out);
  cv::cvtColor(bgr, dst, cv::COLOR_BGR2RGB);
  return out;
}

Tensor decode(const Bytes& b, const char* op) {
  if (jpeg_magic(b)) {
    tjhandle tj = decompressor();
    const JpegInfo info = jpeg_header(tj, b, op);
    // libjpeg-turbo cannot turn CMYK / YCCK into RGB; OpenCV can.
    if (info.colorspace != TJCS_CMYK && info.colorspace != TJCS_YCCK)
      return jpeg_decode(tj, b, info, tjscalingfactor{1, 1}, op);
  }
  return cv_decode(b, op);
}

}  // namespace

bool is_jpeg(const Tensor& bytes) { return jpeg_magic(bytes_of(bytes, "is_jpeg")); }

data::TensorOp Decode() {
  return [](const Tensor& x) { return decode(bytes_of(x, "Decode"), "Decode"); };
}

data::TensorOp DecodeResize(std::vector<int64_t> size, Inter interpolation) {
  detail::size_hw(size, "DecodeResize");  // validates now, not on the first sample
  return [size = std::move(size), interpolation](const Tensor& x) {
    const char* op = "DecodeResize";
    const Bytes b = bytes_of(x, op);
    Tensor img;
    if (jpeg_magic(b)) {
      tjhandle tj = decompressor();
      const JpegInfo info = jpeg_header(tj, b, op);
      if (info.colorspace != TJCS_CMYK && info.colorspace != TJCS_YCCK) {
        const auto [th, tw] = detail::resize_target(info.h, info.w, size, op);
        // The smallest DCT scale whose output still covers the target: the resize after it only
        // shrinks by less than 2x, so its result matches a full decode + resize closely.
        tjscalingfactor best{1, 1};
        for (int denom : {2, 4, 8}) {
          const tjscalingfactor sf{1, denom};
          if (TJSCALED(info.w, sf) >= tw && TJSCALED(info.h, sf) >= th) best = sf;
        }
        img = jpeg_decode(tj, b, info, best, op);
        const detail::Image im = detail::image_of(img, op);
        return detail::resize(im, th, tw, interpolation);
      }
    }
    img = decode(b, op);
    const detail::Image im = detail::image_of(img, op);
    const auto [th, tw] = detail::resize_target(im.h, im.w, size, op);
    return detail::resize(im, th, tw, interpolation);
  };
}

data::TensorOp RandomCropDecodeResize(std::vector<int64_t> size, std::vector<double> scale,
                                      std::vector<double> ratio, Inter interpolation) {
  const auto hw = detail::size_hw(
      size, "RandomCropDecodeResize");  // no structured binding: lambdas capture these (clang 14)
  const int64_t th = hw.first, tw = hw.second;
  detail::check_rrc_params(scale, ratio, "RandomCropDecodeResize");
  return [=](const Tensor& x) {
    const char* op = "RandomCropDecodeResize";
    const Bytes b = bytes_of(x, op);
    if (jpeg_magic(b)) {
      tjhandle tj = decompressor();
      const JpegInfo info = jpeg_header(tj, b, op);
      if (info.colorspace != TJCS_CMYK && info.colorspace != TJCS_YCCK) {
        const detail::CropBox box =
            detail::random_resized_crop_box(info.h, info.w, scale[0], scale[1], ratio[0], ratio[1]);
        tjscalingfactor best{1, 1};
        for (int denom : {2, 4, 8}) {
          const tjscalingfactor sf{1, denom};
          if (TJSCALED(int(box.w), sf) >= tw && TJSCALED(int(box.h), sf) >= th) best = sf;
        }
        const detail::Image img = detail::image_of(jpeg_decode(tj, b, info, best, op), op);
        const double fx = double(img.w) / info.w, fy = double(img.h) / info.h;
        if (interpolation == Inter::Area || interpolation == Inter::Lanczos) {
          // The crop in the scaled image's pixels, grown outwards to whole pixels.
          const int64_t x0 = int64_t(std::floor(double(box.left) * fx));
          const int64_t y0 = int64_t(std::floor(double(box.top) * fy));
          const int64_t x1 = std::min(img.w, int64_t(std::ceil(double(box.left + box.w) * fx)));
          const int64_t y1 = std::min(img.h, int64_t(std::ceil(double(box.top + box.h) * fy)));
          return detail::crop_resize(img, y0, x0, std::max<int64_t>(1, y1 - y0),
                                     std::max<int64_t>(1, x1 - x0), th, tw, interpolation);
        }
        // Point-sampling modes: sample the exact (sub-pixel) crop, as cv::resize would sample the
        // crop of the full image. dst index u -> src index a u + b (pixel centers at integers).
        const double ax = double(box.w) * fx / double(tw), ay = double(box.h) * fy / double(th);
        const cv::Matx23d inv(ax, 0, double(box.left) * fx + 0.5 * ax - 0.5, 0, ay,
                              double(box.top) * fy + 0.5 * ay - 0.5);
        Tensor out = Tensor::empty({th, tw, 3}, kUInt8);
        cv::Mat dst = detail::as_mat(out);
        cv::warpAffine(detail::as_mat(img.t), dst, cv::Mat(inv), dst.size(),
                       detail::cv_inter(interpolation) | cv::WARP_INVERSE_MAP,
                       cv::BORDER_REPLICATE);
        SPORE_ASSERT(dst.data == out.data_ptr(), "cv::warpAffine reallocated its output");
        return out;
      }
    }
    const detail::Image img = detail::image_of(decode(b, op), op);
    const detail::CropBox box =
        detail::random_resized_crop_box(img.h, img.w, scale[0], scale[1], ratio[0], ratio[1]);
    return detail::crop_resize(img, box.top, box.left, box.h, box.w, th, tw, interpolation);
  };
}

Tensor encode_image(const Tensor& image, const std::string& ext, int jpeg_quality) {
  const detail::Image img = detail::image_of(image, "encode_image");
  SPORE_CHECK_TYPE(img.dtype() == kUInt8, "[vision.encode_image] expected a uint8 image, got ",
                   dtype_name(img.dtype()));
  SPORE_CHECK(img.c == 1 || img.c == 3, "[vision.encode_image] expected 1 or 3 channels, got ",
              img.c);
  SPORE_CHECK(ext == ".jpg" || ext == ".jpeg" || ext == ".png",
              "[vision.encode_image] ext must be .jpg or .png, got '", ext, "'");
  cv::Mat src = detail::as_mat(img.t), bgr;
  if (img.c == 3)
    cv::cvtColor(src, bgr, cv::COLOR_RGB2BGR);
  else
    bgr = src;
  std::vector<unsigned char> buf;
  std::vector<int> params;
  if (ext != ".png") params = {cv::IMWRITE_JPEG_QUALITY, jpeg_quality};
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, cv::imencode(ext, bgr, buf, params),
                   "[vision.encode_image] OpenCV could not encode ", ext);
  return from_buffer(buf.data(), {int64_t(buf.size())}, kUInt8);
}

}  // namespace spore::vision
