"""All layer classes, re-exported by ``ember.nn``."""
from ember.nn.modules.adaptive import AdaptiveLogSoftmaxWithLoss  # noqa: F401
from ember.nn.modules.activation import (  # noqa: F401
    CELU, ELU, GELU, GLU, Hardsigmoid, Hardswish, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU,
    ReLU6, SELU, Sigmoid, SiLU, Softmax, Softmin, Softplus, Softsign, Tanh, Tanhshrink, Threshold,
)
from ember.nn.modules.attention import MultiheadAttention, NonDynamicallyQuantizableLinear  # noqa: F401
from ember.nn.modules.container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential  # noqa: F401
from ember.nn.modules.conv import Conv1d, Conv2d, Conv3d, ConvTranspose2d  # noqa: F401
from ember.nn.modules.dropout import AlphaDropout, Dropout, Dropout1d, Dropout2d  # noqa: F401
from ember.nn.modules.flatten import Flatten, Unflatten  # noqa: F401
from ember.nn.modules.fractional_pooling import FractionalMaxPool2d, FractionalMaxPool3d  # noqa: F401
from ember.nn.modules.linear import Bilinear, Identity, Linear  # noqa: F401
from ember.nn.modules.linear_cross_entropy import LinearCrossEntropyLoss, LinearCrossEntropyOptions  # noqa: F401
from ember.nn.modules.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, HingeEmbeddingLoss, HuberLoss, KLDivLoss,
    L1Loss, MarginRankingLoss, MSELoss, MultiLabelMarginLoss, MultiMarginLoss, NLLLoss, PoissonNLLLoss,
    SmoothL1Loss, SoftMarginLoss,
    TripletMarginLoss,
)
from ember.nn.modules.module import Module, RemovableHandle  # noqa: F401
from ember.nn.modules.normalization import BatchNorm1d, BatchNorm2d, BatchNorm3d, GroupNorm, LayerNorm  # noqa: F401
from ember.nn.modules.pooling import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AdaptiveMaxPool2d, AvgPool1d, AvgPool2d, AvgPool3d, MaxPool1d, MaxPool2d,
    MaxPool3d,
)
from ember.nn.modules.positional import LearnedPositionalEmbedding, PositionalEncoding  # noqa: F401
from ember.nn.modules.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNBase, RNNCell, RNNCellBase  # noqa: F401
from ember.nn.modules.sparse import Embedding  # noqa: F401
from ember.nn.modules.upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d  # noqa: F401
from ember.nn.modules.transformer import (  # noqa: F401
    Transformer, TransformerDecoder, TransformerDecoderLayer, TransformerEncoder, TransformerEncoderLayer,
)

from ember.nn.modules.more import *  # noqa: E402,F401,F403  (padding, instance norm, lazy modules, ...)

__all__ = [name for name in dir() if name[:1].isupper()]


def _elsewhere_in_modules(module_name: str):  # noqa: ANN202
    """PyTorch files its classes differently (MultiheadAttention lives in torch.nn.modules.activation):
    any nn class is found from any ember.nn.modules submodule, so ``torch.nn.modules.<file>.<Class>`` works."""
    def __getattr__(name: str):  # noqa: ANN202, N807
        if name in __all__:
            return globals()[name]
        raise AttributeError(f"module {module_name!r} has no attribute {name!r}")
    return __getattr__


for _name, _module in list(__import__("sys").modules.items()):
    if _name.startswith(__name__ + ".") and _module is not None and "__getattr__" not in vars(_module):
        _module.__getattr__ = _elsewhere_in_modules(_name)
