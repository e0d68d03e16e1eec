"""The caller's side of a request, wherever its engine runs: prompt encoding that releases the GIL,
incremental detokenization, and the delivery of engine items into the caller's thread or event loop
as TokenEvents and a FinalEvent."""
