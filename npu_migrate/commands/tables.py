"""Check every shipped data table against its schema: the rules' tables (`codemods/data`, through
`codemods.data.tables`) and each wing's (`npu_migrate/<wing>/data_tables.py`, a `TableSet` named
`TABLES`). A JSON file in a wing that no `TableSet` declares is a problem too: every table is read
through core's one loader.

    python -m npu_migrate.commands.tables --check   # exit 1 and one line per problem

It lives with the commands, the one layer above both the rules and the wings it reads (a
developer's command, like `python -m npu_migrate.commands.docgen`).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
from pathlib import Path

from codemods.data import tables as rule_tables
from npu_migrate.core.tables import TABLE_SUFFIXES, TableSet

PACKAGE = Path(__file__).resolve().parents[1]


def wing_tables() -> dict[str, TableSet]:
    """wing name -> its TableSet, from every `npu_migrate/<wing>/data_tables.py` that exists."""
    found: dict[str, TableSet] = {}
    for info in pkgutil.iter_modules([str(PACKAGE)]):
        if info.ispkg and (PACKAGE / info.name / "data_tables.py").is_file():
            found[info.name] = importlib.import_module(f"npu_migrate.{info.name}.data_tables").TABLES
    return found


def undeclared(sets: dict[str, TableSet]) -> list[str]:
    """JSON and TOML files shipped in npu_migrate that no TableSet declares."""
    declared = {(table_set.folder / name).resolve() for table_set in sets.values() for name in table_set.schemas}
    shipped = sorted(path for suffix in TABLE_SUFFIXES for path in PACKAGE.rglob(f"*{suffix}"))
    return [f"{path.relative_to(PACKAGE.parent)}: a data table no `data_tables.py` declares"
            for path in shipped if path.resolve() not in declared]


def problems() -> list[str]:
    sets = wing_tables()
    found = rule_tables.problems()
    for table_set in sets.values():
        found += table_set.problems()
    return found + undeclared(sets)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m npu_migrate.commands.tables",
                                     description="Check every shipped data table against its schema.")
    parser.add_argument("--check", action="store_true", help="check every table (the default action)")
    parser.parse_args(argv)
    found = problems()
    for problem in found:
        print(f"data: {problem}", file=sys.stderr)
    if not found:
        count = len(list(rule_tables.DATA.glob("*.json"))) + sum(len(s.schemas) for s in wing_tables().values())
        print(f"{count} tables OK (codemods/data and the wings' data_tables.py)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
