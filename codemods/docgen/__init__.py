"""Generated documentation: rule pages and docs/coverage.md, rendered from the rules and the data."""
