"""The benchmark suite, ``python -m bench``: shmaug against Keras' workers, the Pool recipe,
tf.data, PyTorch and Grain on the workloads W1-W3. ``run`` drives it, ``child`` measures one
contender in a process of its own, ``peers/`` holds the contenders.
"""
