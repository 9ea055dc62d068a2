"""The apply wing: engine (one file), runner (many files, cache, parallelism), selection and summary."""
