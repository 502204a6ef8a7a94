"""Command line: ``python -m corekit.lm prepare|status [NAME ...]`` converts (once) or lists the offline models."""
from __future__ import annotations

import argparse
import sys
from typing import Sequence

from corekit.lm.loading import OFFLINE, ModelNotAvailable, load


def main(argv: Sequence[str] | None = None) -> int:
    """Return the exit status of ``prepare`` (load, converting once, each model) or ``status`` (say what is installed)."""
    parser = argparse.ArgumentParser(prog="python -m corekit.lm", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("prepare", "status"),
                        help="prepare: load (and convert, once) each model; status: say what is installed")
    parser.add_argument("names", nargs="*", default=list(OFFLINE), help=f"models (default: {' '.join(OFFLINE)})")
    args = parser.parse_args(argv)
    status = 0
    for name in args.names:
        if args.command == "status":
            offline = OFFLINE.get(name)
            state = ("installed" if offline.installed() else f"missing: {offline.install}") if offline else "hub id"
            print(f"{name}: {state}")
            continue
        try:
            lm = load(name, device="cpu")
            print(f"{name}: {lm.n_layers} layers, d_model {lm.d_model}, from {lm.source}")
        except ModelNotAvailable as err:
            print(f"{name}: {err}", file=sys.stderr)
            status = 1
    return status


if __name__ == "__main__":
    sys.exit(main())
