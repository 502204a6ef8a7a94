"""``python -m corekit``: the corekit command line."""
from corekit.book.cli import main

raise SystemExit(main())
