"""Pass `multicore`: how an instance spreads over cores (`split`), and the cooperative
activations multicast core to core (`exchange`)."""
