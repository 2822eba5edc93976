"""The engine benchmark, ``python -m bench.engine``: five sections (identity, scaling, seeding,
startup, main process), each in a child process; ``run`` drives them.
"""
