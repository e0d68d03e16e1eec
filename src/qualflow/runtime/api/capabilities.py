"""The capabilities a Task declares; the server and correctness dispatch on them."""

TEXT_GENERATION = "text-generation"
STREAMING = "streaming"
SCORING = "scoring"  # teacher-forced logits, used by family correctness
REASONING = "reasoning"  # thinking on request (GenerationRequest.thinking): the family declares a thinking mode
