"""mindspore.nn: Cell, the layers, losses, optimizers, learning-rate schedules and the training
wrappers, under MindSpore's names."""
from .cell import Cell, CellList, CppCell, GraphCell, SequentialCell
from .layer import (AdaptiveAvgPool2d, AvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, Conv2d, Conv2dTranspose, Dense,
                    Dropout, Embedding, Flatten, GELU, GroupNorm, Identity, LayerNorm, LeakyReLU, LogSoftmax,
                    MaxPool2d, Pad, ReLU, ReLU6, SiLU, Sigmoid, Softmax, SyncBatchNorm, Tanh, Upsample,
                    get_activation)
from .transformer import (MultiheadAttention, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder,
                          TransformerEncoderLayer)
from .loss import (BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, L1Loss, LossBase, MSELoss, NLLLoss,
                   SmoothL1Loss, SoftmaxCrossEntropyWithLogits)
from .optim import (SGD, Adagrad, Adam, AdamW, AdamWeightDecay, CosineDecayLR, ExponentialDecayLR, InverseDecayLR,
                    Lamb, LearningRateSchedule, Momentum, NaturalExpDecayLR, Optimizer, PolynomialDecayLR, RMSProp,
                    WarmUpLR, cosine_decay_lr, exponential_decay_lr, inverse_decay_lr, natural_exp_decay_lr,
                    piecewise_constant_lr, polynomial_decay_lr, warmup_lr)
from .rnns import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNCell
from .wrap import TrainOneStepCell, TrainOneStepWithLossScaleCell, WithEvalCell, WithLossCell
from .._metrics import (MAE, MSE, Accuracy, ConfusionMatrix, F1, Loss, Metric, Precision, Recall,
                             Top1CategoricalAccuracy, Top5CategoricalAccuracy, TopKCategoricalAccuracy)
