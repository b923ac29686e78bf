"""ember.optim: optimizers and learning-rate schedulers with torch.optim's names and semantics.

Example:
    >>> import ember
    >>> w = ember.randn(4, 3, requires_grad=True)
    >>> opt = ember.optim.Adam([w], lr=1e-3)
    >>> sched = ember.optim.lr_scheduler.StepLR(opt, step_size=10, gamma=0.5)
    >>> w.sum().backward(); opt.step(); sched.step(); opt.zero_grad()
"""
from __future__ import annotations

from ember.optim.optimizer import Optimizer, required  # noqa: F401
from ember.optim.sgd import SGD  # noqa: F401
from ember.optim.rmsprop import RMSprop  # noqa: F401
from ember.optim.adagrad import Adagrad  # noqa: F401
from ember.optim.adam import Adam, AdamW  # noqa: F401
from ember.optim import lr_scheduler  # noqa: F401
from ember.optim.more import ASGD, Adadelta, Adamax, NAdam, RAdam, Rprop, SparseAdam  # noqa: F401
from ember.optim.lbfgs import LBFGS  # noqa: F401
from ember.optim import swa_utils  # noqa: F401
from ember.optim.adafactor import Adafactor  # noqa: F401
from ember.optim.muon import Muon  # noqa: F401
from ember.optim.stateless import swap_in_optimizer_params_and_state  # noqa: F401

__all__ = ["Optimizer", "SGD", "RMSprop", "Adagrad", "Adam", "AdamW", "lr_scheduler",
           "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop", "ASGD", "LBFGS", "swa_utils", "SparseAdam",
           "Adafactor", "Muon", "swap_in_optimizer_params_and_state"]
