"""npu-migrate's codemods: small LibCST rules, one concern each. Layers, bottom up: `data` (the
tables), `model` (the per-file model and node helpers), `api` (the rule API), `analyses` (shared
analyses), `families` (rule-family bases), `rules` (the built-in rules); `docgen` renders pages.
See docs/architecture.md."""
