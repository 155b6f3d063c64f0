"""Pass `memplan`: the buffers (`buffers`, collected by `build`), pools, liveness, promotion
and addresses (`plan`); the report's placement (`placement`)."""
