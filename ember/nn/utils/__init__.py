"""``ember.nn.utils``: gradient clipping, parameter/vector conversion, and ``rnn`` (packed sequences)."""
from ember.nn.utils import rnn  # noqa: F401
from ember.nn.utils.clip_grad import clip_grad_norm_, clip_grad_value_, get_total_norm  # noqa: F401
from ember.nn.utils.convert import parameters_to_vector, vector_to_parameters  # noqa: F401

clip_grad_norm = clip_grad_norm_  # PyTorch's deprecated alias
