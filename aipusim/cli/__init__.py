"""The ``aipusim`` command line: one module per subcommand, wired in `main`."""
