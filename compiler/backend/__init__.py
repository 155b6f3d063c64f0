"""The compiler's back half (docs/architecture.md §5): lower, tile, multicore, IMC mapping,
memory plan, schedule, estimate, emit. The passes are `aipusim.compiler.backend.passes`, listed in
`aipusim.compiler.pipeline`; their IR is `aipusim.compiler.backend.common.ir`;
`aipusim.compiler.backend.run.run_backend` runs them without the driver."""
