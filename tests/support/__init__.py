"""Helpers the tests and the benchmarks share: the chromium they drive and how they read
resident memory. Standard library (and playwright) only, nothing from nbinspect or pytest,
so a benchmark or a test's subprocess imports them without the test suite's machinery."""
