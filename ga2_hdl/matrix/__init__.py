"""The matrix lane: the processing element and the systolic array, their tiled and streamed forms, the operand
feeders, the result writer and the matrix unit that joins them (docs/ARCHITECTURE.md)."""
