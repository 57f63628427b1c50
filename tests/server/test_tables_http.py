"""Table management over HTTP: exact bodies and status codes (docs/http-api.md)."""

from __future__ import annotations

from tests.server.conftest import create

TS = {"name": "_timestamp", "type": "timestamp", "nullable": True, "header": None}
PROPS = {"name": "props", "type": "dynamic", "nullable": True, "header": None}


def test_create_returns_201_and_the_describe_document(http, table_name):
    r = http.post("/v1/tables", json={
        "name": table_name, "mode": "drop", "retention": "7d",
        "columns": [{"name": "service", "type": "string"},
                    {"name": "n", "type": "LONG", "nullable": False, "default": 0},
                    {"name": "hdrs", "type": "ARRAY<STRUCT<key STRING, value BYTES>>",
                     "header": "*"}]})
    assert r.status_code == 201, r.text
    assert r.headers["content-type"] == "application/json"
    assert r.json() == {
        "name": table_name, "schema_version": 1, "mode": "drop", "retention": "7d",
        "columns": [TS, PROPS,
                    {"name": "service", "type": "string", "nullable": True, "header": None},
                    {"name": "n", "type": "long", "nullable": False, "header": None,
                     "default": 0},
                    {"name": "hdrs", "type": "ARRAY<STRUCT<key STRING, value BYTES>>",
                     "nullable": True, "header": "*"}],
        "snapshot_id": 1, "row_count": 0, "extent_count": 0,
        "properties": {"retention": "7d"}}
    # The same document from GET, and in the listing.
    assert http.get(f"/v1/tables/{table_name}").json() == r.json()
    listed = http.get("/v1/tables")
    assert listed.status_code == 200
    assert r.json() in listed.json()["tables"]


def test_header_key_binding(http, table_name):
    r = create(http, table_name, [{"name": "trace", "type": "bytes", "header": "trace-id"}])
    assert r.json()["columns"][2] == {"name": "trace", "type": "bytes", "nullable": True,
                                      "header": "trace-id"}
    assert r.json()["mode"] == "evolve" and r.json()["retention"] is None


def test_create_existing_is_409(http, table_name):
    create(http, table_name, [])
    r = http.post("/v1/tables", json={"name": table_name, "columns": []})
    assert r.status_code == 409
    assert r.json() == {"error": {"code": "table_exists",
                                  "message": f'table "{table_name}" already exists',
                                  "details": []}}


def test_invalid_definitions_are_400_invalid_schema(http, table_name):
    cases = [
        ({"name": table_name, "columns": [{"name": "a", "type": "nope"}]}, "columns.0.type"),
        ({"name": table_name, "columns": [{"name": "a"}]}, "columns.0.type"),
        ({"name": table_name, "columns": [{"name": "a", "type": "int", "colour": 1}]},
         "columns.0.colour"),
        ({"columns": []}, "name"),
        ({"name": "Bad-Name", "columns": []}, None),
        ({"name": table_name, "columns": [{"name": "props", "type": "string"}]}, "props"),
        ({"name": table_name, "columns": [], "mode": "sometimes"}, None),
        ({"name": table_name, "columns": [], "retention": "a week"}, "retention"),
        ({"name": table_name, "columns": [], "retention": "0d"}, "retention"),
        ({"name": table_name, "columns": [{"name": "h", "type": "string", "header": "*"}]},
         "h"),
    ]
    for body, field in cases:
        r = http.post("/v1/tables", json=body)
        assert r.status_code == 400, (body, r.text)
        err = r.json()["error"]
        assert err["code"] == "invalid_schema", (body, err)
        assert err["message"]
        if field is None:
            assert err["details"] == []
        else:
            assert [d["field"] for d in err["details"]] == [field], (body, err)
            assert all(d["line"] is None and d["message"] for d in err["details"])
    # Nothing was created by any of them.
    assert http.get(f"/v1/tables/{table_name}").status_code == 404


def test_body_that_is_not_json(http):
    r = http.post("/v1/tables", content=b"{not json",
                  headers={"content-type": "application/json"})
    assert r.status_code == 400
    err = r.json()["error"]
    assert err["code"] == "invalid_schema" and err["message"].startswith("body is not valid JSON")


def test_unknown_table_is_404(http):
    r = http.get("/v1/tables/no_such_table")
    assert r.status_code == 404
    assert r.json() == {"error": {"code": "table_not_found",
                                  "message": 'table "no_such_table" does not exist',
                                  "details": []}}
    r = http.post("/v1/tables/no_such_table/columns",
                  json={"columns": [{"name": "x", "type": "int"}]})
    assert r.status_code == 404 and r.json()["error"]["code"] == "table_not_found"


def test_add_and_widen_columns(http, table_name):
    create(http, table_name, [{"name": "n", "type": "int"}])
    r = http.post(f"/v1/tables/{table_name}/columns",
                  json={"columns": [{"name": "n", "type": "long"},
                                    {"name": "msg", "type": "string"}]})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["schema_version"] == 2
    assert doc["columns"][2:] == [
        {"name": "n", "type": "long", "nullable": True, "header": None},
        {"name": "msg", "type": "string", "nullable": True, "header": None}]
    assert http.get(f"/v1/tables/{table_name}").json() == doc
    # The same change again is a no-op: same version.
    again = http.post(f"/v1/tables/{table_name}/columns",
                      json={"columns": [{"name": "msg", "type": "string"}]})
    assert again.status_code == 200 and again.json()["schema_version"] == 2


def test_incompatible_change_is_409_and_changes_nothing(http, table_name):
    create(http, table_name, [{"name": "n", "type": "long"}])
    r = http.post(f"/v1/tables/{table_name}/columns",
                  json={"columns": [{"name": "n", "type": "int"}]})
    assert r.status_code == 409
    msg = (f'table "{table_name}": column "n" is long; cannot change it to int: '
           "the schema only widens")
    assert r.json() == {"error": {"code": "incompatible_schema_change", "message": msg,
                                  "details": [{"line": None, "field": "n", "message": msg}]}}
    r = http.post(f"/v1/tables/{table_name}/columns",
                  json={"columns": [{"name": "req", "type": "int", "nullable": False}]})
    assert r.status_code == 409
    assert r.json()["error"]["code"] == "incompatible_schema_change"
    assert http.get(f"/v1/tables/{table_name}").json()["schema_version"] == 1


def test_add_columns_body_errors(http, table_name):
    create(http, table_name, [])
    for body in ({"columns": []}, {}, {"columns": [{"name": "x", "type": "vector(0)"}]}):
        r = http.post(f"/v1/tables/{table_name}/columns", json=body)
        assert r.status_code == 400, (body, r.text)
        assert r.json()["error"]["code"] == "invalid_schema"


def test_unknown_route_and_method_use_the_error_shape(http):
    r = http.get("/v1/nothing-here")
    assert r.status_code == 404
    assert r.json() == {"error": {"code": "not_found", "message": "Not Found", "details": []}}
    r = http.delete("/v1/tables")
    assert r.status_code == 405
    assert r.json()["error"]["code"] == "method_not_allowed"


def test_oversized_definition_is_413(http):
    r = http.post("/v1/tables", content=b"[" + b" " * (2 << 20) + b"]",
                  headers={"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["error"]["code"] == "payload_too_large"
