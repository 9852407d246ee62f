"""``python -m edge image|setup --arch arm64|amd64``: see :mod:`edge`."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from edge.host import EdgeSetupError, check_arch, container_engine, ensure_binfmt
from edge.image import build_image, default_cache


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m edge", description=__doc__)
    parser.add_argument("command", choices=["image", "setup"])
    parser.add_argument("--arch", default="arm64")
    parser.add_argument(
        "--cache", type=Path, help="default: $FEDIMB_EDGE_CACHE or ~/.cache/fedimb-edge"
    )
    args = parser.parse_args(argv)
    cache = args.cache or default_cache()
    try:
        ensure_binfmt(check_arch(args.arch))
        with container_engine(cache) as engine:
            if args.command == "image":
                print(build_image(engine, args.arch, cache), flush=True)
            else:
                print(
                    f"edge: {engine.name} answers; {args.arch} programs run on this host",
                    flush=True,
                )
    except EdgeSetupError as err:
        print(f"edge: error: {err}", file=sys.stderr, flush=True)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
