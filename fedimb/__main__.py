"""``python -m fedimb`` is the ``fedimb`` command.

``-m`` puts the working directory first on ``sys.path``: from a run folder (data, perhaps
someone else's) a ``numpy.py`` or ``omegaconf.py`` there would be imported in place of the
real one. So it goes before any other import; the installed ``fedimb`` script starts with
its own folder there instead, and fedimb adds nothing to ``sys.path``.
"""

import os
import sys

try:
    _cwd = os.getcwd()
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _cwd]
except OSError:  # the working directory was removed: nothing can be imported from it
    pass

from fedimb.cli.main import main  # noqa: E402 - after the working directory left sys.path

main()
