"""The `npu-migrate` command line. Subcommands load lazily so that a pre-commit run of
`apply` does not pay for importing the analyzer, the verifier or torch."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import click

from npu_migrate import __version__

# name -> module under npu_migrate.commands that defines a click command called `command`
SUBCOMMANDS = {
    "apply": "apply",
    "analyze": "analyze",
    "verify": "verify",
    "memory": "memory",
    "rules": "rules",
}


# optional dependencies: top-level module -> the extra of pyproject.toml that installs it
EXTRAS = {"numpy": "memory"}


class LazyGroup(click.Group):
    def main(self, *args: Any, **kwargs: Any) -> Any:
        from npu_migrate.core.tables import DataError

        try:
            return super().main(*args, **kwargs)
        except DataError as exc:  # a shipped table off its schema (a code table read late, mid-run)
            click.echo(f"npu-migrate: error: {exc}", err=True)
            sys.exit(2)
        except ModuleNotFoundError as exc:
            missing = (exc.name or "").partition(".")[0]
            if missing not in EXTRAS:
                raise
            click.echo(f"npu-migrate: error: this command needs {missing}, which is not installed: "
                       f"pip install 'npu-migrate[{EXTRAS[missing]}]'", err=True)
            sys.exit(2)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        module_name = SUBCOMMANDS.get(name)
        if module_name is None:
            return None
        module = importlib.import_module(f"npu_migrate.commands.{module_name}")
        return module.command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="npu-migrate")
def main() -> None:
    """Migrate PyTorch code from CUDA to Ascend NPUs (torch_npu)."""


if __name__ == "__main__":  # pragma: no cover
    main()
