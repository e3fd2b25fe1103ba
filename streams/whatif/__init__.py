"""`quotaflow whatif`: replay a recorded input log under a changed configuration, in simulated time.

`source.py` reads the log (SQLite, Kafka or an events file) into timed items, `changes.py` reads
and checks the change, `simulation.py` is the discrete-event loop around the engine,
`measure.py` what each world is measured by, and `compare.py` the comparison of two worlds.
"""
