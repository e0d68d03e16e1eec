"""Wire models of the Responses API subset we serve (stateless, single-turn, text only), one concern
a module: `requests` (the request body, parsed strictly), `input_items` (its `input` as chat
messages), `responses` (the Response and its output items), `events` (the stream's events),
`reasoning` (the `reasoning` capability's request field, output item and events) and `errors`
(ApiError in OpenAI's shape, and pydantic's validation errors translated to it).

Rendering them is the HTTP layer's (server/http/: JSON bodies, SSE frames).
docs/server.md lists how each request field is handled, and why."""
