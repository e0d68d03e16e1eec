"""The engine in its own process, by role: `core` (the engine process of one API process: its entry
point, and `EngineProxy`, the API side that starts and owns it), `core_hub` (one engine process
shared by several API processes, and `EngineHost`, which starts it), `core_client` (the API
side's link, the engine interface over the pipes; `reading`: who reads its pipe) and `messages`
(what crosses the pipes)."""
