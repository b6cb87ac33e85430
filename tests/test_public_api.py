"""The public surface: ``memstrata.__all__`` and ``python -m memstrata``."""

from __future__ import annotations

import dataclasses
import inspect
import os
import subprocess
import sys
import types
import typing
from importlib.metadata import version

import memstrata


def test_all_has_no_duplicates() -> None:
    assert len(memstrata.__all__) == len(set(memstrata.__all__))


def test_every_name_in_all_resolves() -> None:
    for name in memstrata.__all__:
        assert hasattr(memstrata, name), name
        assert getattr(memstrata, name) is not None, name


def test_star_import_gives_exactly_all() -> None:
    namespace: dict[str, object] = {}
    exec("from memstrata import *", namespace)
    exported = {name for name in namespace if name != "__builtins__"}
    assert exported == set(memstrata.__all__)


def test_every_public_memstrata_class_or_function_is_in_all() -> None:
    public = set()
    for name, value in vars(memstrata).items():
        if name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if getattr(value, "__module__", "").split(".")[0] != "memstrata":
            continue  # imported helpers such as importlib.metadata.version
        public.add(name)
    missing = public - set(memstrata.__all__)
    assert not missing, f"public but not in __all__: {sorted(missing)}"
    assert {"Memory", "Turn", "Hit", "Role", "InvalidInput", "load_settings"} <= public


def test_every_model_a_public_memory_method_returns_is_importable_from_memstrata() -> None:
    from memstrata import models

    def models_in(hint: object, seen: frozenset[object] = frozenset()) -> set[type]:
        if hint in seen:
            return set()
        found = {hint} if inspect.isclass(hint) and getattr(hint, "__module__", "") == models.__name__ else set()
        for argument in typing.get_args(hint):
            found |= models_in(argument, seen | {hint})
        if inspect.isclass(hint) and dataclasses.is_dataclass(hint):  # what a returned model holds
            for field_type in typing.get_type_hints(hint).values():
                found |= models_in(field_type, seen | {hint})
        return found

    returned: set[type] = set()
    for name, method in inspect.getmembers(memstrata.Memory, inspect.isfunction):
        if not name.startswith("_"):
            returned |= models_in(typing.get_type_hints(method).get("return"))
    assert {model.__name__ for model in returned} - set(memstrata.__all__) == set()
    assert {"Context", "Inspection", "Consolidation", "Cell", "Pattern", "Subgraph"} <= {m.__name__ for m in returned}


def test_core_types_are_the_implementations() -> None:
    from memstrata.errors import InvalidInput, MemstrataError
    from memstrata.memory import Memory
    from memstrata.models import Turn

    assert memstrata.Memory is Memory
    assert memstrata.Turn is Turn
    assert memstrata.InvalidInput is InvalidInput
    assert issubclass(memstrata.InvalidInput, ValueError)
    assert issubclass(memstrata.NotFound, KeyError)
    for name in memstrata.__all__:
        value = getattr(memstrata, name)
        if inspect.isclass(value) and issubclass(value, Exception):
            assert issubclass(value, MemstrataError), name


def test_version_matches_the_installed_distribution() -> None:
    assert memstrata.__version__ == version("memstrata")


def test_python_dash_m_help_works() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "memstrata", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "120"},
    )
    assert result.returncode == 0, result.stderr
    assert "Usage" in result.stdout
    for command in ("add", "search", "history", "forget", "export"):
        assert command in result.stdout
