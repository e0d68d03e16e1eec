"""The Task API's public types: a request and its sampling parameters, the events a request
delivers, the errors the Task raises and the capabilities it declares. Plain data, no torch:
every other part of the runtime (and every caller) shares this vocabulary, and it imports nothing
else of the runtime."""
