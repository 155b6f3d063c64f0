"""Built-in compiler configuration TOML files."""
