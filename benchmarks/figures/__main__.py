"""``python -m benchmarks.figures``: redraw the documentation's figures."""

from benchmarks.figures import main

raise SystemExit(main())
