"""`python -m shoal`: the same command as the `shoal` script (`shoal.cli.main:app`)."""

from shoal.cli.main import app

app(prog_name="shoal")
