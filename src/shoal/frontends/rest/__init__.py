"""shoal's own REST protocol (docs/http-api.md): NDJSON ingest (`ingest`), SQL and KQL
statements (`query`) and table management (`tables`), each an `APIRouter` that
`shoal.server.app` mounts."""
