"""`aipusim calibrate` and the bands on a result: the (I) numbers against measurements.

`fit` moves the inferred (I) numbers of an arch file, each within its range, to match measured
runs (a CSV) and reports in-sample, leave-one-out and held-out residuals; `uncertainty` samples
the (I) numbers jointly over their ranges and reports how far FPS, energy per frame and power
move. Both recompile only the back end per arch (`aipusim.api.retarget`).
"""
