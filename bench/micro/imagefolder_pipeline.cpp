// The ImageNet-style training input pipeline on an ImageFolder of JPEGs, timed over whole passes
// (bench/peers/imagefolder.sh runs it next to torchvision's DataLoader on the same files):
//   unfused  ImageFolderDataset(bytes) .map({Decode, RandomResizedCrop 224, RandomHorizontalFlip,
//            Normalize (HWC), HWC2CHW}, workers) .batch(32)
//   fused    the same with RandomCropDecodeResize 224 in place of Decode + RandomResizedCrop
//            (the crop is drawn on the JPEG header, decoded at a DCT scale; MindSpore's idiom)
// The source reads the file bytes inline (1 worker); the map runs on --workers threads.
// Modes:
//   --generate DIR [--count N] [--classes K] [--noise S]
//                                              write N photo-like 500x375 JPEGs (quality 90) into
//                                              K class folders under DIR, then exit
//   --dir DIR [--passes P] [--workers W] [--variant unfused|fused|both]
//                                              one JSON line per variant: images/s of each pass
//   (no --dir)                                 self-contained: generates 640 images in a temp dir,
//                                              runs both variants, prints a table (bench/run_all.sh
//                                              calls it this way; --benchmark_* flags are ignored)
// Add a variant: a branch in make_pipeline() and its name in the variant list.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "spore/context.h"
#include "spore/data/dataset.h"
#include "spore/data/vision.h"
#include "spore/error.h"

namespace {

namespace fs = std::filesystem;
using namespace spore;

// A photo-like w x h RGB image: smooth color fields (different per image), a finer texture and
// noise, so the JPEG has roughly the bits per pixel of a real photo (a flat image would decode
// unrealistically fast). The sines are separable (sin(a + b) = sin a cos b + cos a sin b), so an
// image costs a few multiply-adds per pixel.
// Noise scale (--noise): sets the bits per pixel. 1.5 gives about 68 KB per 500x375 image (2.9
// bits per pixel, a typical photo at quality 90); 3 gives about 100 KB (ImageNet's mean file size).
double kNoise = 1.5;
Tensor make_image(int w, int h, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0, 1);
  Tensor img = Tensor::empty({h, w, 3}, kUInt8);  // (H, W, 3)
  uint8_t* p = img.data<uint8_t>();
  std::vector<double> sx(size_t(w) * 6), cx(size_t(w) * 6), sy(size_t(h) * 6), cy(size_t(h) * 6);
  double amp[6];
  for (int k = 0; k < 6; ++k) {  // k < 3: smooth field of channel k; k >= 3: texture
    const bool smooth = k < 3;
    const double fx = smooth ? 0.004 + 0.02 * u(gen) : 0.1 + 0.3 * u(gen);
    const double fy = smooth ? 0.004 + 0.02 * u(gen) : 0.1 + 0.3 * u(gen);
    const double px = 6.28 * u(gen), py = 6.28 * u(gen);
    amp[k] = smooth ? 50 + 30 * u(gen) : 8 + 12 * u(gen);
    for (int x = 0; x < w; ++x) {
      sx[size_t(k) * w + x] = std::sin(fx * x + px);
      cx[size_t(k) * w + x] = std::cos(fx * x + px);
    }
    for (int y = 0; y < h; ++y) {
      sy[size_t(k) * h + y] = std::sin(fy * y + py);
      cy[size_t(k) * h + y] = std::cos(fy * y + py);
    }
  }
  uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      const int t = 3 + (x / 64 + y / 64) % 3;  // texture varies by region
      const double tex = amp[t] * (sx[size_t(t) * w + x] * cy[size_t(t) * h + y] +
                                   cx[size_t(t) * w + x] * sy[size_t(t) * h + y]);
      for (int c = 0; c < 3; ++c) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;  // xorshift noise, about +-6
        const double noise = double(s >> 60) - 7.5 + double((s >> 56) & 15) - 7.5;
        const double v = 128 + tex +
                         amp[c] * (sx[size_t(c) * w + x] * cy[size_t(c) * h + y] +
                                   cx[size_t(c) * w + x] * sy[size_t(c) * h + y]) +
                         kNoise * noise;
        p[(size_t(y) * w + x) * 3 + c] = uint8_t(std::clamp(std::lround(v), 0l, 255l));
      }
    }
  return img;
}

void generate(const fs::path& dir, int count, int classes) {
  for (int i = 0; i < count; ++i) {
    const fs::path cls = dir / ("class_" + std::to_string(i % classes));
    fs::create_directories(cls);
    const Tensor jpg = vision::encode_image(make_image(500, 375, uint64_t(i) + 1), ".jpg", 90);
    char name[32];
    std::snprintf(name, sizeof name, "img_%05d.jpg", i);
    std::ofstream f(cls / name, std::ios::binary);
    f.write(reinterpret_cast<const char*>(jpg.data<uint8_t>()), std::streamsize(jpg.numel()));
    SPORE_CHECK(f.good(), "[imagefolder_pipeline] cannot write ", (cls / name).string());
  }
}

data::Dataset make_pipeline(const std::string& dir, const std::string& variant, int workers) {
  data::ImageFolderOptions o;
  o.shuffle = true;
  o.num_parallel_workers = 1;  // reading bytes is cheap; the map's workers do the real work
  // ImageNet mean / std, scaled to uint8 values (torchvision's ToTensor divides by 255 first).
  const std::vector<double> mean = {0.485 * 255, 0.456 * 255, 0.406 * 255};
  const std::vector<double> stdv = {0.229 * 255, 0.224 * 255, 0.225 * 255};
  std::vector<data::Operation> ops;
  if (variant == "fused") {
    ops = {vision::RandomCropDecodeResize({224, 224})};
  } else {
    SPORE_CHECK(variant == "unfused", "[imagefolder_pipeline] --variant must be unfused, fused ",
                "or both, got ", variant);
    ops = {vision::Decode(), vision::RandomResizedCrop({224, 224})};
  }
  ops.push_back(vision::RandomHorizontalFlip());
  ops.push_back(vision::Normalize(mean, stdv, /*is_hwc=*/true));
  ops.push_back(vision::HWC2CHW());
  return data::ImageFolderDataset(dir, o).map(ops, "image", workers).batch(32);
}

// CPU seconds (user + system) of all threads of this process so far.
double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * double(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

struct PassStats {
  std::vector<double> images_per_s, cpu_ms_per_image;
};

// images/s of each pass (iterator creation to the last batch, so worker start-up is included,
// as it is in a DataLoader without persistent_workers), and CPU ms per image, which a busy
// machine disturbs less than wall time.
PassStats run(const std::string& dir, const std::string& variant, int workers, int passes) {
  const data::Dataset ds = make_pipeline(dir, variant, workers);
  PassStats st;
  for (int p = 0; p < passes; ++p) {
    const double c0 = cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    int64_t images = 0;
    auto it = ds.create_tuple_iterator();
    while (auto row = it->next()) {
      const Tensor& x = (*row)[0];  // (32, 3, 224, 224) float32
      SPORE_CHECK(x.dim() == 4 && x.size(1) == 3 && x.size(2) == 224 && x.size(3) == 224 &&
                      x.dtype() == kFloat32,
                  "[imagefolder_pipeline] unexpected batch ", shape_str(x.shape()));
      images += x.size(0);
    }
    it.reset();  // joins the workers, so their CPU time is counted
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    st.images_per_s.push_back(double(images) / s);
    st.cpu_ms_per_image.push_back(1e3 * (cpu_seconds() - c0) / double(images));
  }
  return st;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string dir, gen_dir, variant = "both";
  int count = 2000, classes = 10, passes = 3, workers = 2;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      SPORE_CHECK(i + 1 < argc, "[imagefolder_pipeline] ", a, " needs a value");
      return argv[++i];
    };
    if (a == "--dir")
      dir = value();
    else if (a == "--generate")
      gen_dir = value();
    else if (a == "--count")
      count = std::stoi(value());
    else if (a == "--classes")
      classes = std::stoi(value());
    else if (a == "--passes")
      passes = std::stoi(value());
    else if (a == "--workers")
      workers = std::stoi(value());
    else if (a == "--variant")
      variant = value();
    else if (a == "--noise")
      kNoise = std::stod(value());
    else if (a.rfind("--benchmark_", 0) == 0)
      continue;  // from bench/run_all.sh
    else
      SPORE_CHECK(false, "[imagefolder_pipeline] unknown argument ", a);
  }
  SPORE_CHECK(count > 0 && classes > 0 && passes > 0 && workers > 0,
              "[imagefolder_pipeline] --count, --classes, --passes and --workers must be > 0");
  if (!gen_dir.empty()) {
    generate(gen_dir, count, classes);
    return 0;
  }
  set_seed(1);
  const std::vector<std::string> variants = variant == "both"
                                                ? std::vector<std::string>{"unfused", "fused"}
                                                : std::vector<std::string>{variant};
  if (!dir.empty()) {
    for (const auto& v : variants) {
      const PassStats st = run(dir, v, workers, passes);
      auto list = [](const std::vector<double>& xs) {
        std::string r;
        for (size_t i = 0; i < xs.size(); ++i) r += (i ? ", " : "") + std::to_string(xs[i]);
        return r;
      };
      std::printf(
          "{\"variant\": \"%s\", \"workers\": %d, \"images_per_s\": [%s], "
          "\"cpu_ms_per_image\": [%s]}\n",
          v.c_str(), workers, list(st.images_per_s).c_str(), list(st.cpu_ms_per_image).c_str());
    }
    return 0;
  }
  // Self-contained run on a small generated folder.
  const fs::path tmp =
      fs::temp_directory_path() / ("spore_imagefolder_bench_" + std::to_string(::getpid()));
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};
  generate(tmp, 640, classes);
  std::printf(
      "ImageFolder pipeline, 640 generated 500x375 JPEGs, batch 32, %d map workers, "
      "median images/s of %d passes:\n",
      workers, passes);
  for (const auto& v : variants) {
    const PassStats st = run(tmp.string(), v, workers, passes);
    std::printf("  %-8s %8.1f images/s  %6.2f CPU ms/image\n", v.c_str(), median(st.images_per_s),
                median(st.cpu_ms_per_image));
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "imagefolder_pipeline: %s\n", e.what());
  return 1;
}
