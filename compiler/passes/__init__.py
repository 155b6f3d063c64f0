"""Graph passes of the compiler front half: each a named function ``(Graph, PassContext) ->
Graph`` (DESIGN.md §4, passes 2-5). `aipusim.compiler.pipeline` lists them in order."""

from aipusim.compiler.passes.context import PassContext

__all__ = ["PassContext"]
