"""Pass `emit`: the `compiled_model/` files, the memory map and the report."""
