"""Pass `tile`: L1 tiling (rows, then output channels) and depth-first fusion groups; the rows
a tile computes and reads (`regions`)."""
