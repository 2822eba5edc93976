"""The GPU-machine benchmark, ``python -m bench.gpu fit|scaling|handover|report|all``; ``run``
drives it, ``fit`` is its ``Model.fit`` section.
"""
