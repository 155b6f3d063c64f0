"""aipusim.isa (see DESIGN.md)."""
