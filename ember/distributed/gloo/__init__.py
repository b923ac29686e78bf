"""``backend="gloo"``: ember's own TCP engine for collectives between CPU processes (no MPI, nothing to install).

* :mod:`.rendezvous`: ``init_process_group("gloo", init_method=...)`` through a store (env://, tcp://, file://).
* :mod:`.mesh`: a TCP connection between every pair of ranks, a reader thread per connection.
* :mod:`.group`: numbering and ordering of a group's operations, async Work, timeouts that name ranks.
* :mod:`.ops`: the collectives, point to point and object collectives.
* :mod:`.objects`: the allow-list unpickler for objects received from other ranks.

Example (each of 2 processes; ``r`` its rank):
    >>> import ember.distributed as dist                                                     # doctest: +SKIP
    >>> dist.init_process_group("gloo", init_method="tcp://127.0.0.1:29500", rank=r, world_size=2)  # doctest: +SKIP
"""
