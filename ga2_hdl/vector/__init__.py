"""The vector lane: the requantisers (in order, pipelined, overlapped with lanes), the softmax unit (front,
back, divider) and the online unit of the long-context instructions (docs/ARCHITECTURE.md,
docs/LONG_CONTEXT.md)."""
