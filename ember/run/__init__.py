"""``ember run script.py [args]``: run a PyTorch script unchanged, with ``torch`` resolved to ember.

Example:
    $ ember run train.py --epochs 1          # `import torch` in train.py imports ember

The pieces: :mod:`ember.run.alias` (a ``sys.meta_path`` finder mapping ``torch.X.Y`` to ``ember.X.Y``),
:mod:`ember.run.runner` (runs the script as ``__main__`` and names a missing name with its file and line).
"""
from ember.run.alias import install, module_for  # noqa: F401
from ember.run.runner import run_script  # noqa: F401
