"""``python -m corekit``: the corekit command line."""
from corekit.cli import main

raise SystemExit(main())
