"""One serving session: the server process (its lifetime owned here), warm-up, protocol conformance
checks and the AIPerf points, in that order."""
