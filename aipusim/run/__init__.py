"""`aipusim run`: compile -> simulate -> profile one model into one folder.

`job` is the run itself (`run_model`, `resolve_model`: a zoo name or an ONNX file), `result`
what it produced (`RunResult`), `report` its ``report.md``, `figures` the one list of headline
figures that the printout and the report both show, `config_text` a config as the outputs
print it, and `progress` the progress bars or plain lines on stderr that every long command
uses. This ``__init__`` imports nothing, so `progress` and `config_text` load without the run.
"""
