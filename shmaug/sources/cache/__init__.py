"""The disk cache of a source in a bucket (``cache_dir=``, ``cache_limit=``): whole objects
kept on the host's disk, shared by its workers, loaders and programs.

- ``disk_cache``: ``DiskCache``: what is cached, written whole and checked, and read back;
- ``plan``: ``CachePlan``: the cache planned from the known order (what to fetch next, what
  to evict);
- ``_space``: the room in the cache's folder: its entries, what to evict, the bound;
- ``_file_lock``: a lock held by one process of the host at a time, through a file.
"""
