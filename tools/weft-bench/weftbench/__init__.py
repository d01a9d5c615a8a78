"""weft-bench: scenario harness and report."""
