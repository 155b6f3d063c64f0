"""Pass `lower` (and `fuse_residual`, `fuse_dpu_chains`): each op to a unit, attention's
MVM-or-DPU choice, layout ops as DMA copies, DPU reduction geometry; residual adds and DPU
chains fused."""
