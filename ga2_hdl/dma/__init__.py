"""The DMA lane and the external ports: the chapter's word-per-beat DMA, the packed DMA, the AXI4 manager and
its burst plan, and ST's whole-word stores (docs/ARCHITECTURE.md, docs/ISA.md "Packed external memory")."""
