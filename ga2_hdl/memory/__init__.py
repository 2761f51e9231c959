"""The scratchpad: the chapter's one memory and the decoupled chip's banked memory with its requesters
(docs/ARCHITECTURE.md, ``ga2_sw.banking``)."""
