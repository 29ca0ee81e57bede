"""mindspore.dataset: sources, pipeline operations, iterators, transforms (vision, transforms),
samplers and config, over Spore's C++ data engine."""
from . import config, transforms, vision
from .engine import (Cifar100Dataset, Cifar10Dataset, CocoDataset, CSVDataset, Dataset, GeneratorDataset,
                     ImageFolderDataset, MnistDataset, NumpySlicesDataset)
from .samplers import (DistributedSampler, RandomSampler, Sampler, SequentialSampler, SubsetRandomSampler,
                       SubsetSampler, WeightedRandomSampler)
from .vision import Border, Inter

# MindSpore 1.x module names (deprecated there since 1.8): the same transforms.
import sys as _sys

for _old, _new in (("vision.c_transforms", vision), ("vision.py_transforms", vision),
                   ("transforms.c_transforms", transforms), ("transforms.py_transforms", transforms)):
    _sys.modules[f"{__name__}.{_old}"] = _new
vision.c_transforms = vision.py_transforms = vision
transforms.c_transforms = transforms.py_transforms = transforms
