"""``workers="auto"``: the pool sized between epochs to the fewest workers that keep the
consumer fed.

- ``autoworkers``: each epoch's figures measured, and the pool resized between epochs;
- ``_autotune``: the rule, a pure function of an epoch's figures to the next worker count.
"""
