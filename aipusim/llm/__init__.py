"""`aipusim llm` and `aipusim.run_llm`: a decoder-only language model on the chip, its
prompt (prefill) and its generation (one decode step per token) compiled and simulated per
multicore mode and context length, with time to first token, tokens/s, energy and DDR
bytes per token and the share of the DDR bandwidth roofline (`job`), written as
``report.md``, JSON and a plot (`report`).
"""
