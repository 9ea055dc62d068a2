"""The per-file model and the helpers every layer above reads: a file's `ast` facts, node helpers
for `ast` and LibCST in one spelling, and the text helpers (import insertion, line maps, the
shell lexer, JSON spans)."""
