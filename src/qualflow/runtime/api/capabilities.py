"""The capabilities a Task declares; the server and correctness dispatch on them."""

TEXT_GENERATION = "text-generation"
STREAMING = "streaming"
SCORING = "scoring"  # teacher-forced logits, used by family correctness
# thinking on request (GenerationRequest.thinking): the family declares a thinking mode
REASONING = "reasoning"
# function tools: the family declares a tool-call format and the engine constrains calls
TOOLS = "tools"
STRUCTURED_OUTPUT = "structured-output"  # text.format json_schema / json_object (constrained)
