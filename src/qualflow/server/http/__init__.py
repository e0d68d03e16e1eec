"""The thin HTTP layer over the Responses handler: the state the routes share (`state`), the
Task's loading within the app's lifespan (`lifespan`), request identity (`middleware`), the
routes (`routes`), SSE rendering (`streaming`, its frames: `sse`) and OpenAI-shaped error bodies
(`errors`). It only moves bytes and keeps the timing records: every request gets one, and every
path out of a request finalizes it exactly once."""
