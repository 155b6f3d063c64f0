"""The one compiled module: the profiler's trace line scanner (`profiler/_native.c`; the rest
of the metadata is in pyproject.toml). It is optional: without a C compiler the install
still succeeds and the profiler falls back to its numpy scan (`aipusim.profiler.scan`)."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "aipusim.profiler._native",
            sources=["profiler/_native.c"],
            extra_compile_args=["-O2"],
            optional=True,
        )
    ]
)
