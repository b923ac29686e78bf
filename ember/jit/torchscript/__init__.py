"""TorchScript archives written by ``torch.jit.save``, read and run by ember without executing anything from them.

``ember.jit.load(path)`` of such an archive returns a :class:`~ember.jit.torchscript.module.TorchScriptModule`: the
pickled module tree read through the weights-only unpickler (:mod:`.archive`, :mod:`.unpickler`), the TorchScript
source parsed with :mod:`ast` (:mod:`.program`) and run by an allow-listed interpreter (:mod:`.interpreter`,
:mod:`.builtins`). docs/serialization.md ("TorchScript archives") says what is allowed and why.
"""
from ember.jit.torchscript.archive import is_torchscript_members  # noqa: F401
from ember.jit.torchscript.errors import TorchScriptError  # noqa: F401
from ember.jit.torchscript.loader import load  # noqa: F401
from ember.jit.torchscript.module import NoTorchScriptGraph, TorchScriptModule  # noqa: F401
