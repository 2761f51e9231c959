"""The analyses that run a simulator themselves (``--sim``): the decode steps as the port widens (``bus``), the
talk's latency graphs measured on the chip (``latency``) and the weight stream (``weight_stream``). The other
analyses are ``ga2_sw.analyses``."""
