"""The emulation's data tables (`npu_migrate/emulation/*.json`: the device mapping, upstream CUDA
autocast's op lists) and their schemas, read through core's one loader."""

from __future__ import annotations

from pathlib import Path

from npu_migrate.core.tables import ListOf, MapOf, Record, TableSet

NAMES = ListOf(str)

SCHEMAS = {
    "mapping.json": Record(
        {"_comment": str, "device_type": str, "device_kwargs": NAMES, "dist_backends": MapOf(MapOf(str)),
         "amp_default_dtype": str, "amp_supported_dtypes": NAMES, "emulated_device_count": int,
         "device_name": str}),
    "autocast.json": Record(
        {"_comment": str,
         "device": Record({"lower_precision_fp": NAMES, "fp32": NAMES, "fp32_set_opt_dtype": NAMES, "promote": NAMES}),
         "cpu_differences": Record({"lower": NAMES, "float32": NAMES})}),
}

TABLES = TableSet(Path(__file__).resolve().parent, SCHEMAS, "npu_migrate/emulation")
