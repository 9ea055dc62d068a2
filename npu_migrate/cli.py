"""The `npu-migrate` command line. Subcommands load lazily so that a pre-commit run of
`apply` does not pay for importing the analyzer, the verifier or torch."""

from __future__ import annotations

import importlib

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


class LazyGroup(click.Group):
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
