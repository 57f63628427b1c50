"""The HTTP toolkit every protocol front end builds on, below the front ends and above the
client: tokens and scopes (`auth`), request bodies with their limits and gzip (`body`), the
one mapping of errors to HTTP answers (`errors`), what a server app holds and how a handler
reaches it (`state`, with its `metrics` and the `spark_health` supervisor), and running a
statement under the server's bounds, blocking or streamed (`statements`).

The application that wires the front ends into one server is `shoal.server`."""
