"""``python -m fedimb`` is the ``fedimb`` command."""

from fedimb.cli import main

main()
