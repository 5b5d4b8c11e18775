"""Every lib module carries at least one worked example in its docstrings, and every example holds."""

import doctest
import importlib
import pkgutil

import pytest

import minformers


def defines_something(name: str) -> bool:
    """False for a package whose __init__ is only its index (recipes, support): it has nothing to show."""
    module = importlib.import_module(name)
    return any(getattr(value, "__module__", None) == name for value in vars(module).values())


# walk_packages: the modules of subpackages too
MODULES = sorted(info.name for info in pkgutil.walk_packages(minformers.__path__, "minformers.")
                 if not info.ispkg or defines_something(info.name))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    # NORMALIZE_WHITESPACE: an expected value may wrap to fit the pages' code column (lib/ruff.toml)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(importlib.import_module(name), optionflags=flags)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
