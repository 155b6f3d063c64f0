"""Pass `estimate`: what each layer's tasks cost, and the planned cost before the schedule."""
