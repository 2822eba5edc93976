"""What every benchmark and study shares: measuring (``harness``), writing results (``report``),
the suite's workloads W1-W3 (``workloads``) and the users' classic PIL glyph code
(``pil_reference``). Imports nothing from the benchmarks.
"""
