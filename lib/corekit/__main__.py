"""``python -m corekit``: the corekit command line."""
from corekit.runs.cli import main

raise SystemExit(main())
