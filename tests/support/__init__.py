"""Shared test support: real servers (S3 via moto) and the pytest fixtures that wrap them.

`tests.support.fixtures` is a pytest plugin module; load it with
`pytest_plugins = ["tests.support.fixtures"]` in the top-level `tests/conftest.py`.
"""
