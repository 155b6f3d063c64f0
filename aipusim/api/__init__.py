"""The Python API: compile a model, call it, simulate it, save and load it.

`compiled` (`aipusim.compile`, `load`, `simulate`, `CompiledModel`) stands on where a compile
starts (`sources`: a file, a ModelProto or a zoo name, its config and the binding of its
inputs to `inputs.InputInfo`), the files of a compiled folder (`modelfiles`), the optimisation
presets (`optlevels`), what a simulation may override (`overrides`), the result with the
profiler's views (`results.SimResult`) and the bit-exactness check of a functional run
(`functional_check`). `leip` and `legacy` are the LEIP-style compile API and its artifacts;
`retarget` compiles one front end for many arch files (studies and calibration). Users reach
these through the names of `aipusim` itself; nothing here is imported by `import aipusim`.
"""
