"""`python -m npu_migrate.emulation [--backing cpu|cuda] SCRIPT [ARGS...]`: run a script as
`__main__` with the emulation active."""

from __future__ import annotations

import os
import runpy
import sys

from . import EmulationError, activate


def main(argv: list[str]) -> int:
    backing = "cpu"
    if argv[:1] == ["--backing"] and len(argv) > 1:
        backing, argv = argv[1], argv[2:]
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2 if not argv else 0
    script = argv[0]
    if not os.path.isfile(script):
        print(f"{script}: no such file", file=sys.stderr)
        return 2
    try:
        activate(backing)
    except EmulationError as error:
        print(f"npu-migrate emulation: {error}", file=sys.stderr)
        return 2
    sys.argv = list(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))  # as `python SCRIPT` does
    runpy.run_path(script, run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
