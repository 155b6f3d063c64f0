"""Pass `schedule`: per-core task order, dependencies and hardware tokens (`build` runs the
parts; see the package README)."""
