"""aipusim.profiler (see DESIGN.md)."""
