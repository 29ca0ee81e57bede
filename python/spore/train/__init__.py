"""mindspore.train: Model, callbacks, metrics and checkpoints; coco: COCO / COCOeval (pycocotools'
interface over Spore's evaluator)."""
from . import coco, yolo
from .._metrics import (MAE, MSE, Accuracy, ConfusionMatrix, F1, Loss, Metric, Precision, Recall,
                        Top1CategoricalAccuracy, Top5CategoricalAccuracy, TopKCategoricalAccuracy, get_metric_fn)
from .callback import (Callback, CheckpointConfig, EarlyStopping, History, LambdaCallback, LossMonitor,
                       ModelCheckpoint, ReduceLROnPlateau, RunContext, TimeMonitor)
from .model import Model
from .export import export, load
from .serialization import load_checkpoint, load_param_into_net, save_checkpoint
from ..amp import DynamicLossScaleManager, FixedLossScaleManager, LossScaleManager
