"""The query-language registry (`shoal.languages`): the root package names the shipped
languages without importing them, and a lookup imports the frontend that speaks one."""

from __future__ import annotations

import subprocess
import sys

import pytest

from shoal.errors import ConfigError
from shoal.languages import language, registered


def test_import_shoal_registers_the_languages_without_importing_them():
    code = """
import sys
import shoal
from shoal.languages import registered
print(sorted(registered().items()))
print(sorted(m for m in sys.modules if m.startswith("shoal.frontends")))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    names, frontends = out.stdout.strip().splitlines()
    assert names == str([("kql", "shoal.frontends.kusto.kql"),
                         ("promql", "shoal.frontends.prometheus.promql")])
    assert frontends == "[]"


def test_a_lookup_gives_the_module_that_speaks_the_language():
    kql = language("kql")
    translation = kql.kql_to_sql("logs | where level == 'error' | take 5",
                                 {"logs": {"level": "string"}}, now_ns_utc=0)
    assert "logs" in translation.sql and "LIMIT 5" in translation.sql.upper()
    assert callable(language("promql").promql_for)
    assert set(registered()) >= {"kql", "promql"}


def test_an_unknown_language_is_a_config_error_naming_the_known_ones():
    with pytest.raises(ConfigError, match="'sparql'.*kql, promql"):
        language("sparql")
