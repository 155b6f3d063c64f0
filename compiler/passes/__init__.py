"""Graph passes of the compiler front half: each a named function ``(Graph, PassContext) ->
Graph`` (docs/architecture.md §5, stages 2-5). `aipusim.compiler.pipeline` lists them in order."""

from aipusim.compiler.passes.context import PassContext

__all__ = ["PassContext"]
