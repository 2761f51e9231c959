"""Control and checking: the sequencer, the decoupled chip's scoreboard, and the instruction checker's stages
(operands, ranges, payloads) that fault a bad word before it runs (docs/ISA.md, docs/ARCHITECTURE.md)."""
