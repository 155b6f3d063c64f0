"""Pass `pack`: every constant byte a layer's tasks read, laid out as they read it."""
