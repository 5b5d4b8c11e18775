"""Every lib module carries at least one worked example in its docstrings, and every example holds."""

import doctest
import importlib
import pkgutil

import pytest

import minformers

# walk_packages: the modules of subpackages (minformers.checks) too
MODULES = sorted(info.name for info in pkgutil.walk_packages(minformers.__path__, "minformers."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name):
    # NORMALIZE_WHITESPACE: an expected value may wrap to fit the pages' code column (lib/ruff.toml)
    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(importlib.import_module(name), optionflags=flags)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0
