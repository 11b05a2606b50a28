"""A/B against the base: the same tests run from a git revision and from the working tree,
round by round in alternation on this machine, and judged by their paired rounds."""
