// YOLOv5's loss (models/yolov5/loss.h): build_targets on the host in float32 (the order of the
// matches is YOLOv5's: offset, then anchor, then target, which decides which match writes a
// shared cell's objectness target), and the loss from ops so it runs eagerly or compiled.
#include "models/yolov5/loss.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <unordered_map>

#include "spore/autograd.h"
#include "spore/grad_mode.h"
#include "spore/ops.h"

namespace spore::models {
namespace {

// BCE with logits, elementwise: max(x, 0) - x t + log(1 + exp(-|x|)).
Tensor bce_logits(const Tensor& x, const Tensor& t) {
  return relu(x) - x * t + softplus(neg(abs(x)));
}

int64_t pow2_at_least(int64_t n) {
  int64_t c = 256;
  while (c < n) c *= 2;
  return c;
}

}  // namespace

YoloLossHyp scaled_hyp(int64_t num_classes, int64_t img_size, YoloLossHyp h) {
  const double nl = 3;
  h.box *= 3 / nl;
  h.cls *= double(num_classes) / 80 * 3 / nl;
  h.obj *= (double(img_size) / 640) * (double(img_size) / 640) * 3 / nl;
  return h;
}

std::array<LevelTargets, 3> build_targets(const Tensor& targets, int64_t batch,
                                          const Tensor& anchors,
                                          const std::array<std::pair<int64_t, int64_t>, 3>& grids,
                                          int64_t nc, const YoloLossHyp& hyp, int64_t capacity) {
  SPORE_CHECK(
      targets.defined() && (targets.numel() == 0 || (targets.dim() == 2 && targets.size(1) == 6)),
      "[yolov5.build_targets] expected targets (T, 6) [image, class, cx, cy, w, h], got ",
      targets.defined() ? shape_str(targets.shape()) : "undefined");
  SPORE_CHECK(anchors.defined() && anchors.shape() == (Shape{3, 3, 2}),
              "[yolov5.build_targets] expected anchors (3, 3, 2), got ",
              anchors.defined() ? shape_str(anchors.shape()) : "undefined");
  SPORE_CHECK(nc >= 1 && batch >= 1, "[yolov5.build_targets] batch and num_classes must be >= 1");
  NoGradGuard ng;
  const std::vector<float> tv =
      targets.numel() ? targets.to(kFloat32).contiguous().to_vector<float>() : std::vector<float>{};
  const std::vector<float> av = anchors.to(kFloat32).contiguous().to_vector<float>();
  const int64_t T = int64_t(tv.size() / 6), na = 3;
  for (int64_t t = 0; t < T; ++t) {
    const float* r = &tv[size_t(t * 6)];
    SPORE_CHECK(r[0] >= 0 && int64_t(r[0]) < batch && r[1] >= 0 && int64_t(r[1]) < nc,
                "[yolov5.build_targets] target ", t, " has image ", r[0], " and class ", r[1],
                "; expected an image in [0, ", batch, ") and a class in [0, ", nc, ")");
    SPORE_CHECK(r[4] > 0 && r[5] > 0 && std::isfinite(r[2] + r[3] + r[4] + r[5]),
                "[yolov5.build_targets] target ", t, " has a non-positive or non-finite size (w ",
                r[4], ", h ", r[5], ")");
  }
  const float g = 0.5f;
  const float off[5][2] = {{0, 0}, {g, 0}, {0, g}, {-g, 0}, {0, -g}};
  struct Match {
    int64_t b, a, gj, gi, c;
    float tb[4], aw, ah;
  };
  std::array<std::vector<Match>, 3> ms;
  for (size_t l = 0; l < 3; ++l) {
    const int64_t ny = grids[l].first, nx = grids[l].second;
    for (int k = 0; k < 5; ++k) {
      for (int64_t a = 0; a < na; ++a) {
        const float aw = av[size_t((int64_t(l) * 3 + a) * 2)],
                    ah = av[size_t((int64_t(l) * 3 + a) * 2 + 1)];
        for (int64_t t = 0; t < T; ++t) {
          const float* r = &tv[size_t(t * 6)];
          const float gx = r[2] * float(nx), gy = r[3] * float(ny), gw = r[4] * float(nx),
                      gh = r[5] * float(ny);
          const float rw = gw / aw, rh = gh / ah;
          const float worst = std::max(std::max(rw, 1 / rw), std::max(rh, 1 / rh));
          if (!(worst < float(hyp.anchor_t))) continue;
          const float gxi = float(nx) - gx, gyi = float(ny) - gy;
          auto frac = [](float v) { return v - std::floor(v); };
          bool use = true;
          if (k == 1) use = frac(gx) < g && gx > 1;
          if (k == 2) use = frac(gy) < g && gy > 1;
          if (k == 3) use = frac(gxi) < g && gxi > 1;
          if (k == 4) use = frac(gyi) < g && gyi > 1;
          if (!use) continue;
          const int64_t gi =
              std::clamp<int64_t>(int64_t(gx - off[k][0]), 0, nx - 1);  // .long(): toward zero
          const int64_t gj = std::clamp<int64_t>(int64_t(gy - off[k][1]), 0, ny - 1);
          ms[l].push_back({int64_t(r[0]),
                           a,
                           gj,
                           gi,
                           int64_t(r[1]),
                           {gx - float(gi), gy - float(gj), gw, gh},
                           aw,
                           ah});
        }
      }
    }
  }
  int64_t cap = capacity;
  if (cap <= 0) cap = pow2_at_least(int64_t(std::max({ms[0].size(), ms[1].size(), ms[2].size()})));
  const float cp = float(1.0 - 0.5 * hyp.label_smoothing), cn = float(0.5 * hyp.label_smoothing);
  std::array<LevelTargets, 3> out;
  for (size_t l = 0; l < 3; ++l) {
    const int64_t ny = grids[l].first, nx = grids[l].second, n = int64_t(ms[l].size());
    SPORE_CHECK(n <= cap, "[yolov5.build_targets] level ", l, " has ", n,
                " matches, more than the capacity ", cap,
                "; pass capacity 0 to size it automatically");
    LevelTargets& o = out[l];
    o.count = n;
    o.index = zeros({cap}, kInt64);
    o.tbox = Tensor::empty({cap, 4}, kFloat32);
    o.anchor = Tensor::empty({cap, 2}, kFloat32);
    o.cls = Tensor::empty({cap, nc}, kFloat32);
    o.mask = zeros({cap});
    o.obj_write = zeros({cap});
    int64_t* idx = o.index.data<int64_t>();
    float *tb = o.tbox.data<float>(), *an = o.anchor.data<float>(), *cl = o.cls.data<float>();
    float *mk = o.mask.data<float>(), *ow = o.obj_write.data<float>();
    std::unordered_map<int64_t, int64_t> last;
    for (int64_t m = 0; m < cap; ++m) {
      if (m < n) {
        const Match& x = ms[l][size_t(m)];
        idx[m] = ((x.b * na + x.a) * ny + x.gj) * nx + x.gi;
        std::copy(x.tb, x.tb + 4, tb + m * 4);
        an[m * 2] = x.aw, an[m * 2 + 1] = x.ah;
        std::fill(cl + m * nc, cl + (m + 1) * nc, cn);
        cl[m * nc + x.c] = cp;
        mk[m] = 1;
        last[idx[m]] = m;
        o.matches.push_back({x.b, x.a, x.gj, x.gi, x.c});
      } else {  // padding: a harmless box (finite loss terms, masked out)
        tb[m * 4] = tb[m * 4 + 1] = 0.5f, tb[m * 4 + 2] = tb[m * 4 + 3] = 1.f;
        an[m * 2] = an[m * 2 + 1] = 1.f;
        std::fill(cl + m * nc, cl + (m + 1) * nc, 0.f);
      }
    }
    for (const auto& [i, m] : last) ow[m] = 1;
  }
  return out;
}

Tensor atan_positive(const Tensor& x) {
  // atan(x) = pi/4 + atan(s), s = (x - 1) / (x + 1) in (-1, 1); atan(s) = 2 atan(u) with
  // u = s / (1 + sqrt(1 + s^2)) in (-0.415, 0.415); the odd series to u^17 leaves < 1e-8.
  const Tensor s = (x - 1.0) / (x + 1.0);
  const Tensor u = s / (sqrt(s * s + 1.0) + 1.0);
  const Tensor u2 = u * u;
  Tensor p = u2 * (1.0 / 17);
  for (int k = 7; k >= 1; --k) p = u2 * (p + ((k % 2) ? -1.0 : 1.0) / double(2 * k + 1));
  return (u * (p + 1.0)) * 2.0 + std::numbers::pi / 4;
}

Tensor bbox_ciou(const Tensor& box1, const Tensor& box2) {
  const double eps = 1e-7;
  auto col = [](const Tensor& b, int64_t i) { return b.slice(1, i, i + 1); };
  const Tensor x1 = col(box1, 0), y1 = col(box1, 1), w1 = col(box1, 2), h1 = col(box1, 3);
  const Tensor x2 = col(box2, 0), y2 = col(box2, 1), w2 = col(box2, 2), h2 = col(box2, 3);
  const Tensor b1x1 = x1 - w1 / 2.0, b1x2 = x1 + w1 / 2.0, b1y1 = y1 - h1 / 2.0,
               b1y2 = y1 + h1 / 2.0;
  const Tensor b2x1 = x2 - w2 / 2.0, b2x2 = x2 + w2 / 2.0, b2y1 = y2 - h2 / 2.0,
               b2y2 = y2 + h2 / 2.0;
  const Tensor inter = clamp(minimum(b1x2, b2x2) - maximum(b1x1, b2x1), 0.0, std::nullopt) *
                       clamp(minimum(b1y2, b2y2) - maximum(b1y1, b2y1), 0.0, std::nullopt);
  const Tensor uni = w1 * h1 + w2 * h2 - inter + eps;
  const Tensor iou = inter / uni;
  const Tensor cw = maximum(b1x2, b2x2) - minimum(b1x1, b2x1),
               ch = maximum(b1y2, b2y2) - minimum(b1y1, b2y1);
  const Tensor c2 = cw * cw + ch * ch + eps;
  const Tensor dx = b2x1 + b2x2 - b1x1 - b1x2, dy = b2y1 + b2y2 - b1y1 - b1y2;
  const Tensor rho2 = (dx * dx + dy * dy) / 4.0;
  const Tensor da = atan_positive(w2 / h2) - atan_positive(w1 / h1);
  const Tensor v = da * da * (4 / (std::numbers::pi * std::numbers::pi));
  const Tensor alpha = stop_gradient(v / (v - iou + (1 + eps)));
  return (iou - (rho2 / c2 + v * alpha)).reshape({box1.size(0)});
}

std::vector<Tensor> flatten_targets(const std::array<LevelTargets, 3>& t) {
  std::vector<Tensor> v;
  for (const auto& l : t)
    v.insert(v.end(), {l.index, l.tbox, l.anchor, l.cls, l.mask, l.obj_write});
  return v;
}

YoloLoss yolo_loss(const std::vector<Tensor>& raw, const std::array<LevelTargets, 3>& targets,
                   const YoloLossHyp& hyp) {
  return yolo_loss(raw, flatten_targets(targets), hyp);
}

YoloLoss yolo_loss(const std::vector<Tensor>& raw, const std::vector<Tensor>& tt,
                   const YoloLossHyp& hyp) {
  SPORE_CHECK(raw.size() == 3 && tt.size() == 18,
              "[yolov5.loss] expected 3 level outputs and 18 target tensors, got ", raw.size(),
              " and ", tt.size());
  Tensor lbox, lobj, lcls;
  const int64_t B = raw[0].size(0);
  for (size_t l = 0; l < 3; ++l) {
    const Tensor& p = raw[l];  // (B, na, ny, nx, no)
    SPORE_CHECK(p.dim() == 5,
                "[yolov5.loss] expected level outputs (B, na, ny, nx, 5 + classes), got ",
                shape_str(p.shape()));
    const int64_t no = p.size(4), nc = no - 5, cells = p.numel() / no;
    const Tensor &index = tt[l * 6], &tbox = tt[l * 6 + 1], &anchor = tt[l * 6 + 2],
                 &cls = tt[l * 6 + 3], &mask = tt[l * 6 + 4], &obj_write = tt[l * 6 + 5];
    const Tensor flat = p.reshape({cells, no});
    const Tensor ps = index_select(flat, 0, index);  // (M, no)
    const Tensor pxy = sigmoid(ps.slice(1, 0, 2)) * 2.0 - 0.5;
    const Tensor pwh = square(sigmoid(ps.slice(1, 2, 4)) * 2.0) * anchor;
    const Tensor iou = bbox_ciou(concat({pxy, pwh}, 1), tbox);  // (M)
    const Tensor n = clamp(sum(mask), 1.0, std::nullopt);
    const Tensor lb = sum((1.0 - iou) * mask) / n;
    // Objectness target: the matched cells get their prediction's CIoU (>= 0, no gradient).
    const Tensor score = stop_gradient(clamp(iou, 0.0, std::nullopt)) * obj_write;
    const Tensor tobj = scatter_add(zeros({cells}), 0, index, score);
    const Tensor lo = mean(bce_logits(flat.slice(1, 4, 5).reshape({cells}), tobj)) * hyp.balance[l];
    lbox = lbox.defined() ? lbox + lb : lb;
    lobj = lobj.defined() ? lobj + lo : lo;
    if (nc > 1) {
      const Tensor lc = sum(bce_logits(ps.slice(1, 5, no), cls) * mask.reshape({mask.size(0), 1})) /
                        (n * double(nc));
      lcls = lcls.defined() ? lcls + lc : lc;
    }
  }
  lbox = lbox * hyp.box;
  lobj = lobj * hyp.obj;
  lcls = lcls.defined() ? lcls * hyp.cls : lbox * 0.0;
  return {(lbox + lobj + lcls) * double(B), lbox, lobj, lcls};
}

}  // namespace spore::models
