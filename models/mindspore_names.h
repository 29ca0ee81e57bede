// Parameter names between MindSpore's model zoo and Spore's models. A .ckpt from (or for)
// MindSpore uses the zoo's names; Spore's models name a few cells differently:
//   ResNet  zoo conv1.* / bn1.*            <-> stem.0.* / stem.1.*
//           zoo layerN.M.bn1d.* / bn2d.*   <-> layerN.M.bn1.* / bn2.*   (basic blocks,
//           ResNet-18/34) everything else (layerN.M.conv1.weight, down_sample_layer.*, end_point.*)
//           is the same
//   LeNet-5, MLP: the same names.
// Optimizer state keeps its prefix ("moments.conv1.weight" <-> "moments.stem.0.weight").
// To add a model: a row in the table in mindspore_names.cpp.
#pragma once
#include <string>

#include "spore/io/checkpoint.h"

namespace spore::models {

// "lenet", "mlp", "resnet18", "resnet34", "resnet50"; "auto" guesses from the names (see
// guess_naming). Unknown names pass through unchanged.
std::string to_mindspore_name(const std::string& model, const std::string& spore_name);
std::string from_mindspore_name(const std::string& model, const std::string& ms_name);
io::NamedTensors to_mindspore_names(const std::string& model, const io::NamedTensors& tensors);
io::NamedTensors from_mindspore_names(const std::string& model, const io::NamedTensors& tensors);

// The model family a set of names belongs to, Spore's or the zoo's names alike: "resnet18" (basic
// blocks), "resnet50" (bottlenecks) or "" (no renaming needed: LeNet-5, MLP, unknown).
std::string guess_naming(const io::NamedTensors& tensors);

}  // namespace spore::models
