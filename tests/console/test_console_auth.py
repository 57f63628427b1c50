"""The console under the API's authentication: a `shoal serve` with tokens. Without a token
the console shows a sign-in prompt and asks the server for no data; a wrong token is
refused with the server's message; the right one (kept in sessionStorage, sent as
`Authorization: Bearer`) opens every page.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from tests.console.conftest import load_logs
from tests.support.server import ServerHandle, start_server

ADMIN, READER = "console-admin-1", "console-reader-2"
expect.set_options(timeout=60_000)     # a hang guard only


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerHandle]:
    with start_server(tmp_path_factory.mktemp("console-auth"), extra_args=["--lazy-spark"],
                      tokens={ADMIN: "admin", READER: "query"}) as h:
        load_logs(h.url, ADMIN)
        yield h


def data_answers(page: Any) -> list[tuple[str, int]]:
    """Every answer of a data route (/v1/..., /metrics) the page receives from now on."""
    seen: list[tuple[str, int]] = []
    page.on("response", lambda r: seen.append((r.url, r.status))
            if "/v1/" in r.url or r.url.endswith("/metrics") else None)
    return seen


def test_without_a_token_the_console_asks_for_one_and_loads_no_data(
        page, server: ServerHandle) -> None:
    answers = data_answers(page)
    page.goto(f"{server.url}/#/tables")
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(page.locator("#token")).to_be_focused()
    assert page.locator("table.grid").count() == 0
    assert answers and all(status == 401 for _, status in answers), answers
    for route in ("#/query", "#/logs", "#/live", "#/tables/logs"):
        page.goto(f"{server.url}/{route}")
        expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert all(status == 401 for _, status in answers), answers

    page.fill("#token", "not-a-token")
    page.press("#token", "Enter")
    expect(page.locator("form.signin .error")).to_contain_text("invalid bearer token")
    assert all(status == 401 for _, status in answers), answers


def test_with_a_token_every_call_carries_it(page, server: ServerHandle) -> None:
    sent: list[str | None] = []
    page.on("request", lambda r: sent.append(r.headers.get("authorization"))
            if "/v1/" in r.url else None)
    page.goto(f"{server.url}/#/tables")
    page.fill("#token", READER)
    page.press("#token", "Enter")
    expect(page.locator("tr[data-table=logs] td").nth(0)).to_have_text("300")
    assert page.evaluate("sessionStorage.getItem('shoal.token')") == READER
    page.goto(f"{server.url}/#/query")
    page.fill("#editor", "SELECT count(*) AS n FROM logs")
    page.press("#editor", "Control+Enter")
    expect(page.locator("#result table.grid tbody td")).to_have_text("300")
    # the first call is the probe that found the server wants a token; then every call has it
    assert sent[0] is None and len(sent) > 2, sent
    assert all(h == f"Bearer {READER}" for h in sent[1:]), sent
    # DDL needs the admin scope: the reader is refused, with the server's message
    page.fill("#editor", "CREATE TABLE nope (a int)")
    page.press("#editor", "Control+Enter")
    expect(page.locator("#query-error .error")).to_contain_text("admin")
    page.get_by_role("button", name="sign out").click()
    expect(page.get_by_role("heading", name="Sign in")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('shoal.token')") is None
