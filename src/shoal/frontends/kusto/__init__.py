"""KQL and the Kusto REST API (docs/kql.md): the language (`kql/`: lexer, parser and the
translation into the query lane's SQL) and the Kusto endpoints (`api`) that run it."""
