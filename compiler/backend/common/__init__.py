"""What every back-end stage shares: the typed stages the passes hand each other (`ir`), the
`Target` a compile is for (`target`), and how an instance spreads over cores (`layout`)."""
