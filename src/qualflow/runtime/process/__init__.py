"""The engine in its own process: the child's entry point (`child`), the API side that stands in for
an in-process engine (`proxy.EngineProxy`, the same interface), and the messages between the two over
the pipes (`messages`)."""
