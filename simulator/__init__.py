"""aipusim.simulator (see DESIGN.md)."""
