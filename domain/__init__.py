"""The engine: Kueue's admission rules as a pure, deterministic fold of input events into decisions.

Importing the package first chooses the engine's form, compiled by mypyc or its sources
(domain/_engine_form.py), so the choice is made before any engine module loads.
"""

from domain._engine_form import choose_engine_form as _choose

_choose()
