# Before any benchmark imports domain/: the engine runs compiled where `make` built it, from its
# sources with QUOTAFLOW_PURE_PYTHON=1 or a stale build (domain/_engine_form.py).
import streams  # noqa: F401
