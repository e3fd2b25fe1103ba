# Every entry point imports streams/ before domain/: here the engine's form is chosen, compiled
# (deploy/compile.py) or from its sources (QUOTAFLOW_PURE_PYTHON=1, or a stale build). See
# streams/compiled_domain.py.
from streams.compiled_domain import choose_engine_form as _choose

_choose()
