"""One module per verb; each exposes a function that returns an exit code."""
