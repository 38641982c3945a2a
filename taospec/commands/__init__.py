"""One module per command; each exposes a function that returns an exit code."""
