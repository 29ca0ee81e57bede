// Detection post-processing on the host (spore/detection/detection.h): box formats, IoU, greedy
// NMS with torchvision's semantics, YOLO's non_max_suppression and the letterbox inverse. Plain
// loops over float32 copies; the shapes involved (hundreds to tens of thousands of boxes) make the
// O(n k) NMS loop cheap next to the network.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include "spore/detection/detection.h"
#include "spore/grad_mode.h"

namespace spore::detection {
namespace {

// A contiguous float32 CPU copy of a (N, 4) box tensor (the input itself when it already is one).
Tensor boxes_f32(const Tensor& b, const char* fn, const char* what = "boxes") {
  SPORE_CHECK(b.defined(), "[detection.", fn, "] ", what, " is undefined");
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, !b.is_symbolic(), "[detection.", fn, "] ", what,
                   " is a traced (Graph mode) tensor; post-processing reads values on the host, so "
                   "run it on the network's output outside the compiled function");
  SPORE_CHECK(b.dim() == 2 && b.size(1) == 4, "[detection.", fn, "] expected ", what,
              " of shape (N, 4), got ", shape_str(b.shape()));
  SPORE_CHECK_TYPE(is_floating(b.dtype()), "[detection.", fn, "] expected float ", what, ", got ",
                   dtype_name(b.dtype()));
  NoGradGuard ng;
  return b.detach().to(kFloat32).contiguous();
}

Tensor vec_f32(const Tensor& s, int64_t n, const char* fn, const char* what) {
  SPORE_CHECK(s.defined() && s.dim() == 1 && s.size(0) == n, "[detection.", fn, "] expected ", what,
              " of shape ", shape_str({n}), " (one per box), got ",
              s.defined() ? shape_str(s.shape()) : "undefined");
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, !s.is_symbolic(), "[detection.", fn, "] ", what,
                   " is a traced tensor");
  NoGradGuard ng;
  return s.detach().to(kFloat32).contiguous();
}

template <typename F>
Tensor map_boxes(const Tensor& boxes, const char* fn, F f) {
  const Tensor src = boxes_f32(boxes, fn);
  Tensor dst = Tensor::empty({src.size(0), 4}, kFloat32);
  const float* s = src.data<float>();
  float* d = dst.data<float>();
  for (int64_t i = 0; i < src.size(0); ++i) f(s + 4 * i, d + 4 * i);
  return dst;
}

Tensor index_tensor(const std::vector<int64_t>& v) {
  Tensor t = Tensor::empty({int64_t(v.size())}, kInt64);
  if (!v.empty()) std::memcpy(t.data_ptr(), v.data(), v.size() * sizeof(int64_t));
  return t;
}

// torchvision's CPU nms_kernel on one group: `order` lists candidate indices; kept ones are
// appended to keep in descending score order.
void greedy_nms(const float* b, const float* scores, std::vector<int64_t> order, double thr,
                std::vector<int64_t>& keep) {
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return scores[x] > scores[y]; });
  const size_t n = order.size();
  std::vector<uint8_t> suppressed(n, 0);
  std::vector<float> area(n);
  for (size_t k = 0; k < n; ++k) {
    const float* p = b + 4 * order[k];
    area[k] = (p[2] - p[0]) * (p[3] - p[1]);
  }
  for (size_t i = 0; i < n; ++i) {
    if (suppressed[i]) continue;
    keep.push_back(order[i]);
    const float* p = b + 4 * order[i];
    for (size_t j = i + 1; j < n; ++j) {
      if (suppressed[j]) continue;
      const float* q = b + 4 * order[j];
      const float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
      const float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
      const float inter = w * h;
      const float iou = inter / (area[i] + area[j] - inter);
      if (double(iou) > thr) suppressed[j] = 1;
    }
  }
}

void check_thr(double thr, const char* fn) {
  SPORE_CHECK(std::isfinite(thr), "[detection.", fn,
              "] iou_threshold must be a finite number, got ", thr);
}

}  // namespace

Tensor xywh2xyxy(const Tensor& boxes) {
  return map_boxes(boxes, "xywh2xyxy", [](const float* s, float* d) {
    d[0] = s[0] - s[2] / 2, d[1] = s[1] - s[3] / 2, d[2] = s[0] + s[2] / 2, d[3] = s[1] + s[3] / 2;
  });
}
Tensor xyxy2xywh(const Tensor& boxes) {
  return map_boxes(boxes, "xyxy2xywh", [](const float* s, float* d) {
    d[0] = (s[0] + s[2]) / 2, d[1] = (s[1] + s[3]) / 2, d[2] = s[2] - s[0], d[3] = s[3] - s[1];
  });
}
Tensor xyxy2ltwh(const Tensor& boxes) {
  return map_boxes(boxes, "xyxy2ltwh", [](const float* s, float* d) {
    d[0] = s[0], d[1] = s[1], d[2] = s[2] - s[0], d[3] = s[3] - s[1];
  });
}
Tensor ltwh2xyxy(const Tensor& boxes) {
  return map_boxes(boxes, "ltwh2xyxy", [](const float* s, float* d) {
    d[0] = s[0], d[1] = s[1], d[2] = s[0] + s[2], d[3] = s[1] + s[3];
  });
}

Tensor box_iou(const Tensor& a, const Tensor& b) {
  const Tensor A = boxes_f32(a, "box_iou", "a"), B = boxes_f32(b, "box_iou", "b");
  const int64_t n = A.size(0), m = B.size(0);
  Tensor out = Tensor::empty({n, m}, kFloat32);
  const float *pa = A.data<float>(), *pb = B.data<float>();
  float* o = out.data<float>();
  for (int64_t i = 0; i < n; ++i) {
    const float* p = pa + 4 * i;
    const float ap = (p[2] - p[0]) * (p[3] - p[1]);
    for (int64_t j = 0; j < m; ++j) {
      const float* q = pb + 4 * j;
      const float w = std::max(0.f, std::min(p[2], q[2]) - std::max(p[0], q[0]));
      const float h = std::max(0.f, std::min(p[3], q[3]) - std::max(p[1], q[1]));
      const float inter = w * h, uni = ap + (q[2] - q[0]) * (q[3] - q[1]) - inter;
      o[i * m + j] = uni > 0 ? inter / uni : 0.f;
    }
  }
  return out;
}

Tensor nms(const Tensor& boxes, const Tensor& scores, double iou_threshold) {
  check_thr(iou_threshold, "nms");
  const Tensor b = boxes_f32(boxes, "nms");
  const Tensor s = vec_f32(scores, b.size(0), "nms", "scores");
  std::vector<int64_t> order(size_t(b.size(0))), keep;
  std::iota(order.begin(), order.end(), 0);
  greedy_nms(b.data<float>(), s.data<float>(), std::move(order), iou_threshold, keep);
  return index_tensor(keep);
}

Tensor batched_nms(const Tensor& boxes, const Tensor& scores, const Tensor& idxs,
                   double iou_threshold) {
  check_thr(iou_threshold, "batched_nms");
  const Tensor b = boxes_f32(boxes, "batched_nms");
  const int64_t n = b.size(0);
  const Tensor s = vec_f32(scores, n, "batched_nms", "scores");
  SPORE_CHECK(idxs.defined() && idxs.dim() == 1 && idxs.size(0) == n,
              "[detection.batched_nms] expected idxs of shape ", shape_str({n}),
              " (one class per box), got ", idxs.defined() ? shape_str(idxs.shape()) : "undefined");
  const std::vector<int64_t> cls = idxs.to_vector<int64_t>();
  // Group by class (classes in first-seen order), NMS per group, then all kept by score.
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t x, int64_t y) { return cls[size_t(x)] < cls[size_t(y)]; });
  std::vector<int64_t> keep;
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j < order.size() && cls[size_t(order[j])] == cls[size_t(order[i])]) ++j;
    greedy_nms(b.data<float>(), s.data<float>(),
               std::vector<int64_t>(order.begin() + long(i), order.begin() + long(j)),
               iou_threshold, keep);
    i = j;
  }
  const float* sc = s.data<float>();
  std::stable_sort(keep.begin(), keep.end(), [&](int64_t x, int64_t y) {
    return sc[x] > sc[y] || (sc[x] == sc[y] && x < y);
  });
  return index_tensor(keep);
}

std::vector<Tensor> non_max_suppression(const Tensor& prediction, const NmsOptions& o) {
  SPORE_CHECK(
      prediction.defined() && prediction.dim() == 3 && prediction.size(2) >= 6,
      "[detection.non_max_suppression] expected predictions of shape (B, N, 5 + classes), got ",
      prediction.defined() ? shape_str(prediction.shape()) : "undefined");
  SPORE_CHECK_KIND(
      ErrorKind::RuntimeError, !prediction.is_symbolic(),
      "[detection.non_max_suppression] the predictions are a traced (Graph mode) tensor; run "
      "post-processing on the network's output outside the compiled function");
  SPORE_CHECK(o.conf_thres >= 0 && o.conf_thres <= 1 && o.iou_thres >= 0 && o.iou_thres <= 1,
              "[detection.non_max_suppression] conf_thres and iou_thres must be in [0, 1], got ",
              o.conf_thres, " and ", o.iou_thres);
  SPORE_CHECK(o.max_det >= 1 && o.max_nms >= 1,
              "[detection.non_max_suppression] max_det and max_nms must be >= 1");
  Tensor pred;
  {
    NoGradGuard ng;
    pred = prediction.detach().to(kFloat32).contiguous();
  }
  const int64_t B = pred.size(0), N = pred.size(1), F = pred.size(2), C = F - 5;
  std::vector<Tensor> out;
  for (int64_t bi = 0; bi < B; ++bi) {
    const float* x = pred.data<float>() + bi * N * F;
    struct Cand {
      float box[4], score;
      int64_t cls;
    };
    std::vector<Cand> cand;
    for (int64_t i = 0; i < N; ++i) {
      const float* r = x + i * F;
      const float obj = r[4];
      if (!(obj > o.conf_thres)) continue;
      const float box[4] = {r[0] - r[2] / 2, r[1] - r[3] / 2, r[0] + r[2] / 2, r[1] + r[3] / 2};
      if (o.multi_label) {
        for (int64_t c = 0; c < C; ++c) {
          const float sc = r[5 + c] * obj;
          if (sc > o.conf_thres) cand.push_back({{box[0], box[1], box[2], box[3]}, sc, c});
        }
      } else {
        int64_t best = 0;
        float bs = r[5] * obj;
        for (int64_t c = 1; c < C; ++c)
          if (r[5 + c] * obj > bs) bs = r[5 + c] * obj, best = c;
        if (bs > o.conf_thres) cand.push_back({{box[0], box[1], box[2], box[3]}, bs, best});
      }
    }
    std::stable_sort(cand.begin(), cand.end(),
                     [](const Cand& a, const Cand& b) { return a.score > b.score; });
    if (int64_t(cand.size()) > o.max_nms) cand.resize(size_t(o.max_nms));
    const int64_t n = int64_t(cand.size());
    Tensor boxes = Tensor::empty({n, 4}, kFloat32), scores = Tensor::empty({n}, kFloat32);
    Tensor cls = Tensor::empty({n}, kInt64);
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(boxes.data<float>() + 4 * i, cand[size_t(i)].box, 4 * sizeof(float));
      scores.data<float>()[i] = cand[size_t(i)].score;
      cls.data<int64_t>()[i] = o.agnostic ? 0 : cand[size_t(i)].cls;
    }
    std::vector<int64_t> keep =
        n ? batched_nms(boxes, scores, cls, o.iou_thres).to_vector<int64_t>()
          : std::vector<int64_t>{};
    if (int64_t(keep.size()) > o.max_det) keep.resize(size_t(o.max_det));
    Tensor det = Tensor::empty({int64_t(keep.size()), 6}, kFloat32);
    float* d = det.data<float>();
    for (size_t k = 0; k < keep.size(); ++k) {
      const Cand& c = cand[size_t(keep[k])];
      std::memcpy(d + 6 * k, c.box, 4 * sizeof(float));
      d[6 * k + 4] = c.score;
      d[6 * k + 5] = float(c.cls);
    }
    out.push_back(det);
  }
  return out;
}

LetterboxGeometry letterbox_geometry(int64_t h, int64_t w, int64_t th, int64_t tw, bool scaleup) {
  SPORE_CHECK(h > 0 && w > 0 && th > 0 && tw > 0,
              "[detection.letterbox_geometry] expected positive sizes, got image (", h, ", ", w,
              ") into (", th, ", ", tw, ")");
  LetterboxGeometry g{h, w, th, tw};
  double r = std::min(double(th) / double(h), double(tw) / double(w));
  if (!scaleup) r = std::min(r, 1.0);
  g.nh = std::clamp<int64_t>(std::llround(double(h) * r), 1, th);
  g.nw = std::clamp<int64_t>(std::llround(double(w) * r), 1, tw);
  g.left = (tw - g.nw) / 2;
  g.top = (th - g.nh) / 2;
  g.sx = float(g.nw) / float(w);
  g.sy = float(g.nh) / float(h);
  return g;
}

Tensor unletterbox_boxes(const Tensor& boxes, const LetterboxGeometry& g) {
  const float W = float(g.w), H = float(g.h), L = float(g.left), T = float(g.top);
  return map_boxes(boxes, "unletterbox_boxes", [&](const float* s, float* d) {
    d[0] = std::clamp((s[0] - L) / g.sx, 0.f, W);
    d[1] = std::clamp((s[1] - T) / g.sy, 0.f, H);
    d[2] = std::clamp((s[2] - L) / g.sx, 0.f, W);
    d[3] = std::clamp((s[3] - T) / g.sy, 0.f, H);
  });
}

}  // namespace spore::detection
