"""The capabilities a Task declares; the server and correctness dispatch on them."""
TEXT_GENERATION = "text-generation"
STREAMING = "streaming"
SCORING = "scoring"   # teacher-forced logits, used by family correctness
