"""The rule framework: the rule API and dispatch, the registry, file facts and the helpers rules share."""
