"""The edgewave Rete engine (Sparkwave design). Pure computation: no I/O, no per-triple logging."""
