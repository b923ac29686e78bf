"""Stand-in ``torch`` package for child processes started by a script under ``ember run``.

``ember run`` puts this folder first on ``PYTHONPATH``, so a process the script spawns (multiprocessing
with ``spawn``, a ``python`` subprocess) that imports ``torch`` gets ember too: this module installs the
same import hook and replaces itself with ember in ``sys.modules``.
"""
from ember.run.alias import install as _install

_install()
