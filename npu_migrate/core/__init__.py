"""The core: diagnostics, sources, discovery, configuration and output formats. Imports nothing
else of npu-migrate."""
