"""Built-in rules: every module here defines `Rule` subclasses; the registry finds them."""
