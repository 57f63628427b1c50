"""`shoal sql` column changes against a local workspace, as a user runs them: a real
subprocess, exit codes and one-line errors."""

from __future__ import annotations

from tests.cli.test_cli import run


def test_rename_drop_and_refused_add_through_the_cli(tmp_path):
    data = ["--data-dir", str(tmp_path / "data")]
    assert run(*data, "sql", "CREATE TABLE ev (a string, status int)",
               cwd=tmp_path).returncode == 0
    for sql in ("ALTER TABLE ev RENAME COLUMN a TO service", "ALTER TABLE ev DROP COLUMN status"):
        out = run(*data, "sql", sql, "--format", "json", cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        assert "altered" in out.stdout
    bad = run(*data, "sql", "ALTER TABLE ev ADD COLUMN service int", cwd=tmp_path)
    assert bad.returncode == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert 'column "service" already exists as string, not int' in bad.stderr
    protected = run(*data, "sql", "ALTER TABLE ev DROP COLUMN props", cwd=tmp_path)
    assert protected.returncode == 1 and 'cannot drop column "props"' in protected.stderr
    out = run(*data, "describe", "ev", cwd=tmp_path)
    assert out.returncode == 0 and "service" in out.stdout and "status" not in out.stdout
