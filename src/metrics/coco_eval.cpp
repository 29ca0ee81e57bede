// metrics::CocoEval: pycocotools' COCOeval for 'bbox', step for step (evaluate -> accumulate ->
// summarize), so every number equals pycocotools' (tests/metrics checks 1e-12 on generated cases).
// Where pycocotools' behaviour is subtle the comment says so; docs/detection.md lists the rules.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <unordered_map>

#include "spore/error.h"
#include "spore/metrics/coco_eval.h"

namespace spore::metrics {
namespace {

// numpy.linspace(start, stop, num): i * ((stop - start) / (num - 1)) + start, the last one = stop.
std::vector<double> linspace(double start, double stop, int n) {
  std::vector<double> v(static_cast<size_t>(n));
  const double step = (stop - start) / double(n - 1);
  for (int i = 0; i < n; ++i) v[size_t(i)] = double(i) * step + start;
  v[size_t(n - 1)] = stop;
  return v;
}

// numpy's pairwise summation (what np.mean uses on a contiguous float64 array), so means agree to
// the last bit rather than to rounding noise.
double pairwise_sum(const double* a, size_t n) {
  if (n < 8) {
    double s = 0.;  // numpy starts from -0.0; only the sign of an all-zero sum differs
    for (size_t i = 0; i < n; ++i) s += a[i];
    return s;
  }
  if (n <= 128) {
    double r[8];
    for (int j = 0; j < 8; ++j) r[j] = a[j];
    size_t i = 8;
    for (; i < n - n % 8; i += 8)
      for (int j = 0; j < 8; ++j) r[j] += a[i + size_t(j)];
    double s = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) s += a[i];
    return s;
  }
  size_t n2 = n / 2;
  n2 -= n2 % 8;
  return pairwise_sum(a, n2) + pairwise_sum(a + n2, n - n2);
}

// IoU of [x, y, w, h] boxes; a crowd ground truth's union is the detection's own area.
double box_iou(const std::array<double, 4>& d, const std::array<double, 4>& g, bool crowd) {
  const double w = std::fmin(d[2] + d[0], g[2] + g[0]) - std::fmax(d[0], g[0]);
  if (w <= 0) return 0;
  const double h = std::fmin(d[3] + d[1], g[3] + g[1]) - std::fmax(d[1], g[1]);
  if (h <= 0) return 0;
  const double i = w * h, da = d[2] * d[3], ga = g[2] * g[3];
  return i / (crowd ? da : da + ga - i);
}

constexpr double kEps = 2.220446049250313e-16;  // np.spacing(1)

}  // namespace

CocoEval::CocoEval(const Coco& gt, const Coco& dt, const std::string& iou_type) : gt_(gt), dt_(dt) {
  SPORE_CHECK_KIND(
      ErrorKind::NotImplemented, iou_type == "bbox", "[CocoEval] iou_type '", iou_type,
      "' is not supported; this evaluator computes 'bbox' (segm and keypoints need masks "
      "and keypoint sigmas)");
  params.img_ids = gt.image_ids();
  params.cat_ids = gt.category_ids();
  params.iou_thrs = linspace(.5, .95, 10);
  params.rec_thrs = linspace(0., 1., 101);
}

const std::array<const char*, 12>& CocoEval::stat_names() {
  static const std::array<const char*, 12> names{"AP",        "AP50",     "AP75",      "AP_small",
                                                 "AP_medium", "AP_large", "AR1",       "AR10",
                                                 "AR100",     "AR_small", "AR_medium", "AR_large"};
  return names;
}

void CocoEval::evaluate() {
  const CocoEvalParams& p = params;
  SPORE_CHECK(
      !p.iou_thrs.empty() && !p.rec_thrs.empty() && !p.max_dets.empty() && !p.area_rng.empty(),
      "[CocoEval] params need at least one IoU threshold, recall threshold, max_dets and area "
      "range");
  SPORE_CHECK(p.area_rng.size() == p.area_lbl.size(), "[CocoEval] params.area_rng has ",
              p.area_rng.size(), " ranges but params.area_lbl ", p.area_lbl.size(),
              " labels; give one label per range");
  img_ids_ = p.img_ids;
  std::sort(img_ids_.begin(), img_ids_.end());
  img_ids_.erase(std::unique(img_ids_.begin(), img_ids_.end()), img_ids_.end());
  cat_ids_ = p.cat_ids;
  std::sort(cat_ids_.begin(), cat_ids_.end());
  cat_ids_.erase(std::unique(cat_ids_.begin(), cat_ids_.end()), cat_ids_.end());
  std::sort(params.max_dets.begin(), params.max_dets.end());
  const size_t I = img_ids_.size(), K = cat_ids_.size(), A = p.area_rng.size(),
               T = p.iou_thrs.size();
  const int64_t max_det = params.max_dets.back();

  std::unordered_map<int64_t, size_t> img_index, cat_index;
  for (size_t i = 0; i < I; ++i) img_index[img_ids_[i]] = i;
  for (size_t k = 0; k < K; ++k) cat_index[cat_ids_[k]] = k;
  // Per (category, image) cell: annotation indices in file order (pycocotools' _gts / _dts).
  std::vector<std::vector<uint32_t>> gts(K * I), dts(K * I);
  auto bucket = [&](const std::vector<CocoAnnotation>& anns,
                    std::vector<std::vector<uint32_t>>& out) {
    for (size_t n = 0; n < anns.size(); ++n) {
      auto ii = img_index.find(anns[n].image_id);
      auto kk = cat_index.find(anns[n].category_id);
      if (ii == img_index.end() || kk == cat_index.end()) continue;
      out[kk->second * I + ii->second].push_back(uint32_t(n));
    }
  };
  bucket(gt_.annotations(), gts);
  bucket(dt_.annotations(), dts);

  eval_imgs_.assign(K * A * I, EvalImage{});
  eval_present_.assign(K * A * I, 0);
  const auto& G_all = gt_.annotations();
  const auto& D_all = dt_.annotations();
  std::vector<double> ious;
  std::vector<uint32_t> gt_order;
  std::vector<uint8_t> gt_matched, ign;
  for (size_t k = 0; k < K; ++k) {
    for (size_t i = 0; i < I; ++i) {
      const std::vector<uint32_t>& g = gts[k * I + i];
      std::vector<uint32_t> d = dts[k * I + i];
      if (g.empty() && d.empty()) continue;
      // Highest score first, stable (numpy's mergesort on -score); at most max_det.
      std::stable_sort(d.begin(), d.end(),
                       [&](uint32_t x, uint32_t y) { return D_all[x].score > D_all[y].score; });
      if (int64_t(d.size()) > max_det) d.resize(size_t(max_det));
      const size_t G = g.size(), D = d.size();
      ious.assign(D * G, 0.);
      for (size_t di = 0; di < D; ++di)
        for (size_t gi = 0; gi < G; ++gi)
          ious[di * G + gi] = box_iou(D_all[d[di]].bbox, G_all[g[gi]].bbox, G_all[g[gi]].iscrowd);
      for (size_t a = 0; a < A; ++a) {
        const double lo = p.area_rng[a][0], hi = p.area_rng[a][1];
        EvalImage& e = eval_imgs_[(k * A + a) * I + i];
        eval_present_[(k * A + a) * I + i] = 1;
        // Ground truth: ignored when crowd or its area is outside [lo, hi]; ignored ones last
        // (stable).
        ign.assign(G, 0);
        for (size_t gi = 0; gi < G; ++gi) {
          const CocoAnnotation& ga = G_all[g[gi]];
          ign[gi] = ga.iscrowd || ga.area < lo || ga.area > hi;
        }
        gt_order.resize(G);
        std::iota(gt_order.begin(), gt_order.end(), 0u);
        std::stable_sort(gt_order.begin(), gt_order.end(),
                         [&](uint32_t x, uint32_t y) { return ign[x] < ign[y]; });
        e.gt_ignore.resize(G);
        for (size_t j = 0; j < G; ++j) e.gt_ignore[j] = ign[gt_order[j]];
        e.dt_scores.resize(D);
        for (size_t di = 0; di < D; ++di) e.dt_scores[di] = D_all[d[di]].score;
        e.dt_matched.assign(T * D, 0);
        e.dt_ignore.assign(T * D, 0);
        if (G > 0 && D > 0) {
          for (size_t t = 0; t < T; ++t) {
            gt_matched.assign(G, 0);
            for (size_t di = 0; di < D; ++di) {
              double best = std::min(p.iou_thrs[t], 1 - 1e-10);
              int64_t m = -1;
              for (size_t j = 0; j < G; ++j) {
                const uint32_t gi = gt_order[j];
                const bool crowd = G_all[g[gi]].iscrowd;
                if (gt_matched[j] && !crowd) continue;  // taken (a crowd region can take many)
                // Matched to a regular gt and only ignored ones remain: stop.
                if (m > -1 && !e.gt_ignore[size_t(m)] && e.gt_ignore[j]) break;
                const double iou = ious[di * G + gi];
                if (iou < best) continue;  // IoU >= best: ties go to the later gt
                best = iou;
                m = int64_t(j);
              }
              if (m == -1) continue;
              e.dt_ignore[t * D + di] = e.gt_ignore[size_t(m)];
              e.dt_matched[t * D + di] = 1;
              gt_matched[size_t(m)] = 1;
            }
          }
        }
        // Unmatched detections outside the area range are ignored.
        for (size_t di = 0; di < D; ++di) {
          const double area = D_all[d[di]].area;
          if (area < lo || area > hi)
            for (size_t t = 0; t < T; ++t)
              if (!e.dt_matched[t * D + di]) e.dt_ignore[t * D + di] = 1;
        }
      }
    }
  }
  evaluated_ = true;
  accumulated_ = false;
}

void CocoEval::accumulate() {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, evaluated_,
                   "[CocoEval] accumulate() before evaluate(); call evaluate() first");
  const CocoEvalParams& p = params;
  const size_t T = p.iou_thrs.size(), R = p.rec_thrs.size(), K = cat_ids_.size(),
               A = p.area_rng.size(), M = p.max_dets.size(), I = img_ids_.size();
  precision_.assign(T * R * K * A * M, -1.);
  recall_.assign(T * K * A * M, -1.);
  std::vector<double> scores, tp, fp, pr;
  std::vector<uint8_t> matched, ignored;
  std::vector<uint32_t> order;
  std::vector<const EvalImage*> E;
  for (size_t k = 0; k < K; ++k) {
    for (size_t a = 0; a < A; ++a) {
      E.clear();
      for (size_t i = 0; i < I; ++i)
        if (eval_present_[(k * A + a) * I + i]) E.push_back(&eval_imgs_[(k * A + a) * I + i]);
      if (E.empty()) continue;
      size_t npig = 0;
      for (const EvalImage* e : E)
        for (uint8_t g : e->gt_ignore) npig += g == 0;
      for (size_t m = 0; m < M; ++m) {
        const size_t max_det = size_t(p.max_dets[m]);
        if (npig == 0) continue;
        // Each image's top max_det, concatenated in image order, then sorted by score (stable).
        scores.clear();
        std::vector<std::pair<const EvalImage*, size_t>> src;  // (image, detection)
        for (const EvalImage* e : E)
          for (size_t di = 0; di < std::min(max_det, e->dt_scores.size()); ++di) {
            scores.push_back(e->dt_scores[di]);
            src.emplace_back(e, di);
          }
        const size_t nd = scores.size();
        order.resize(nd);
        std::iota(order.begin(), order.end(), 0u);
        std::stable_sort(order.begin(), order.end(),
                         [&](uint32_t x, uint32_t y) { return scores[x] > scores[y]; });
        tp.resize(nd);
        fp.resize(nd);
        for (size_t t = 0; t < T; ++t) {
          double ctp = 0, cfp = 0;
          for (size_t n = 0; n < nd; ++n) {
            const auto [e, di] = src[order[n]];
            const size_t D = e->dt_scores.size();
            const bool mt = e->dt_matched[t * D + di], ig = e->dt_ignore[t * D + di];
            ctp += mt && !ig;
            cfp += !mt && !ig;
            tp[n] = ctp;
            fp[n] = cfp;
          }
          const size_t rk = ((t * K + k) * A + a) * M + m;
          recall_[rk] = nd ? tp[nd - 1] / double(npig) : 0.;
          pr.resize(nd);
          std::vector<double> rc(nd);
          for (size_t n = 0; n < nd; ++n) {
            rc[n] = tp[n] / double(npig);
            pr[n] = tp[n] / (fp[n] + tp[n] + kEps);
          }
          for (size_t n = nd; n-- > 1;)  // precision envelope: non-increasing from the right
            if (pr[n] > pr[n - 1]) pr[n - 1] = pr[n];
          for (size_t r = 0; r < R; ++r) {
            const size_t at =
                size_t(std::lower_bound(rc.begin(), rc.end(), p.rec_thrs[r]) - rc.begin());
            const size_t pk = (((t * R + r) * K + k) * A + a) * M + m;
            precision_[pk] = at < nd ? pr[at] : 0.;  // a recall never reached: precision 0
          }
        }
      }
    }
  }
  accumulated_ = true;
}

double CocoEval::precision(int64_t t, int64_t r, int64_t k, int64_t a, int64_t m) const {
  const int64_t T = int64_t(params.iou_thrs.size()), R = int64_t(params.rec_thrs.size()),
                K = int64_t(cat_ids_.size()), A = int64_t(params.area_rng.size()),
                M = int64_t(params.max_dets.size());
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, accumulated_,
                   "[CocoEval] precision() before accumulate()");
  SPORE_CHECK_INDEX(
      t >= 0 && t < T && r >= 0 && r < R && k >= 0 && k < K && a >= 0 && a < A && m >= 0 && m < M,
      "[CocoEval] precision index (", t, ", ", r, ", ", k, ", ", a, ", ", m, ") outside (", T, ", ",
      R, ", ", K, ", ", A, ", ", M, ")");
  return precision_[size_t((((t * R + r) * K + k) * A + a) * M + m)];
}

double CocoEval::recall(int64_t t, int64_t k, int64_t a, int64_t m) const {
  const int64_t T = int64_t(params.iou_thrs.size()), K = int64_t(cat_ids_.size()),
                A = int64_t(params.area_rng.size()), M = int64_t(params.max_dets.size());
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, accumulated_,
                   "[CocoEval] recall() before accumulate()");
  SPORE_CHECK_INDEX(t >= 0 && t < T && k >= 0 && k < K && a >= 0 && a < A && m >= 0 && m < M,
                    "[CocoEval] recall index (", t, ", ", k, ", ", a, ", ", m, ") outside (", T,
                    ", ", K, ", ", A, ", ", M, ")");
  return recall_[size_t(((t * K + k) * A + a) * M + m)];
}

// The mean of the defined (> -1) entries at one area range and max_dets, over every (or one) IoU
// threshold, every recall threshold (AP) and category; -1 when none is defined.
double CocoEval::summarize_one(bool ap, double iou_thr, const std::string& area,
                               int64_t max_det) const {
  const CocoEvalParams& p = params;
  const size_t T = p.iou_thrs.size(), R = p.rec_thrs.size(), K = cat_ids_.size(),
               A = p.area_rng.size(), M = p.max_dets.size();
  std::vector<size_t> ts, as, ms;
  for (size_t t = 0; t < T; ++t)
    if (iou_thr < 0 || p.iou_thrs[t] == iou_thr) ts.push_back(t);
  for (size_t a = 0; a < A; ++a)
    if (p.area_lbl[a] == area) as.push_back(a);
  for (size_t m = 0; m < M; ++m)
    if (p.max_dets[m] == max_det) ms.push_back(m);
  std::vector<double> vals;  // numpy's s[s > -1] order: (T, R, K, A, M) row-major
  for (size_t t : ts) {
    for (size_t r = 0; r < (ap ? R : 1); ++r)
      for (size_t k = 0; k < K; ++k)
        for (size_t a : as)
          for (size_t m : ms) {
            const double v = ap ? precision_[(((t * R + r) * K + k) * A + a) * M + m]
                                : recall_[((t * K + k) * A + a) * M + m];
            if (v > -1) vals.push_back(v);
          }
  }
  if (vals.empty()) return -1;
  return pairwise_sum(vals.data(), vals.size()) / double(vals.size());
}

std::string CocoEval::summarize() {
  SPORE_CHECK_KIND(ErrorKind::RuntimeError, accumulated_,
                   "[CocoEval] summarize() before accumulate(); call "
                   "evaluate() and accumulate() first");
  struct Row {
    bool ap;
    double iou;
    const char* area;
    int64_t max_det;
  };
  const int64_t md = params.max_dets.back();
  const int64_t m0 = params.max_dets.front(),
                m1 = params.max_dets[std::min<size_t>(1, params.max_dets.size() - 1)];
  const Row rows[12] = {
      {true, -1, "all", md},    {true, .5, "all", md},     {true, .75, "all", md},
      {true, -1, "small", md},  {true, -1, "medium", md},  {true, -1, "large", md},
      {false, -1, "all", m0},   {false, -1, "all", m1},    {false, -1, "all", md},
      {false, -1, "small", md}, {false, -1, "medium", md}, {false, -1, "large", md}};
  std::string out;
  char iou_str[32], line[160];
  std::snprintf(iou_str, sizeof iou_str, "%0.2f:%0.2f", params.iou_thrs.front(),
                params.iou_thrs.back());
  for (int n = 0; n < 12; ++n) {
    const Row& r = rows[n];
    stats_[size_t(n)] = summarize_one(r.ap, r.iou, r.area, r.max_det);
    char one[16];
    if (r.iou >= 0) std::snprintf(one, sizeof one, "%0.2f", r.iou);
    std::snprintf(line, sizeof line, " %-18s %s @[ IoU=%-9s | area=%6s | maxDets=%3lld ] = %0.3f\n",
                  r.ap ? "Average Precision" : "Average Recall", r.ap ? "(AP)" : "(AR)",
                  r.iou >= 0 ? one : iou_str, r.area, (long long)r.max_det, stats_[size_t(n)]);
    out += line;
  }
  return out;
}

std::array<double, 12> coco_evaluate(const Coco& gt, const Coco& dt) {
  CocoEval ev(gt, dt, "bbox");
  ev.evaluate();
  ev.accumulate();
  ev.summarize();
  return ev.stats();
}

}  // namespace spore::metrics
