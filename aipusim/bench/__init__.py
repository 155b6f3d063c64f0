"""`aipusim bench`: how fast the toolkit itself is.

`speed` measures compile time (per compiler pass), simulation wall time, simulated tasks/s and
peak RSS of zoo models, each in a fresh process, and the cost of a sweep point split into its
front end and back end; `functional` times one functional (bit-level) frame next to
onnxruntime and the int8 reference executor. Both write the tables of docs/benchmarks.md.
"""
