"""`python -m shoal.query.embedded.functions --update docs/sql.md` rewrites the generated
function table of that page (between its `functions: generated` markers); without
arguments it prints the table."""

from __future__ import annotations

import sys
from pathlib import Path

from shoal.query.embedded.functions import function_table_markdown

BEGIN, END = "<!-- functions: generated -->\n", "<!-- functions: end -->"


def main(argv: list[str]) -> int:
    table = function_table_markdown()
    if argv[:1] != ["--update"] or len(argv) != 2:
        sys.stdout.write(table)
        return 0
    page = Path(argv[1])
    text = page.read_text()
    head, rest = text.split(BEGIN, 1)
    page.write_text(head + BEGIN + table + END + rest.split(END, 1)[1])
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
