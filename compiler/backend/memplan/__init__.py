"""Pass `memplan`: pools, liveness, promotion and addresses (`plan`); the report's placement
(`placement`)."""
