"""Rendering of the event model: op table, Chrome trace, collapsed stacks, units."""
