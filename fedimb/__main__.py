"""``python -m fedimb`` is the ``fedimb`` command."""

from fedimb.cli.main import main

main()
