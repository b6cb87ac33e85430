"""Pure memory policies: importance, heat and consolidation, with `now` always passed in."""
