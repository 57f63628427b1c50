"""The error tree: every shoal error sits under the branch that gives it its HTTP status.

Directly under `ShoalError` there are only the three branches (request, unavailable,
internal), so a new error cannot fall through to a 500 by being hung on the root.
"""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import shoal
from shoal.errors import InternalError, RequestError, ShoalError, UnavailableError
from shoal.http.errors import status_for


def _all_error_classes() -> list[type[ShoalError]]:
    for mod in pkgutil.walk_packages(shoal.__path__, "shoal."):
        if not mod.name.endswith("__main__"):      # running it would start the CLI
            importlib.import_module(mod.name)
    seen: list[type[ShoalError]] = []
    todo = [ShoalError]
    while todo:
        cls = todo.pop()
        for sub in cls.__subclasses__():
            if sub not in seen:
                seen.append(sub)
                todo.append(sub)
    return seen


ALL = _all_error_classes()


def test_only_the_three_branches_hang_on_the_root():
    direct = {c for c in ALL if ShoalError in c.__bases__}
    assert direct == {RequestError, UnavailableError, InternalError}


@pytest.mark.parametrize("cls", ALL, ids=lambda c: f"{c.__module__}.{c.__name__}")
def test_status_follows_the_branch(cls):
    status = status_for(cls.__new__(cls))
    if issubclass(cls, UnavailableError):
        assert status in (429, 503)
    elif issubclass(cls, RequestError):
        assert 400 <= status < 500
    else:
        assert issubclass(cls, InternalError)
        assert status == 500

