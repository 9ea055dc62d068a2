"""npu-migrate's codemods: small LibCST transformers, one concern each (installed as
`codemods`). See `base.Rule` for the API and `registry` for how rules are found."""
