// Training curves as a PNG (cairo): a loss panel (train loss, eval loss if given) and a metric
// panel (accuracy or any named metric), each with axes, numbered ticks, axis labels, a legend,
// and a title over both. Output is deterministic (cairo's toy text API, "sans-serif").
//   io::TrainingCurves c;
//   c.loss = {{"train", train_losses}, {"eval", eval_losses}};
//   c.metric = {{"eval", accuracies}};
//   io::save_training_curves("curves.png", c);
#pragma once
#include <string>
#include <vector>

#include "spore/io/metrics.h"

namespace spore::io {

struct CurveSeries {
  std::string label;           // legend entry
  std::vector<double> values;  // one per epoch
  std::vector<double> epochs;  // x values; empty means 1, 2, ..., values.size()
};

struct TrainingCurves {
  std::string title = "Training curves";
  std::vector<CurveSeries> loss;         // left panel, y label "loss"
  std::string metric_name = "accuracy";  // right panel's y label
  std::vector<CurveSeries> metric;       // right panel; omitted when empty
  int width = 1200, height = 500;        // pixels
};

// Throws spore::Error on bad input (no series, mismatched lengths, non-finite values are skipped)
// or when the PNG cannot be written.
void save_training_curves(const std::string& path, const TrainingCurves& curves);

// Curves from MetricsWriter records: keys containing "loss" go to the loss panel, the key
// metric_name (and "eval_" + metric_name / "train_" + metric_name) to the metric panel.
TrainingCurves curves_from_metrics(const std::vector<MetricValues>& records,
                                   const std::string& metric_name = "accuracy");

}  // namespace spore::io
