"""The rule API: `Rule` and its context, the one-pass dispatch, the registry, rule cases and pages'
sections, suppressions, prefilters and targets. What a rule or a plugin imports to be a rule."""
