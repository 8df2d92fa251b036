"""A BSBM-like workload generator for the Sparkwave benchmark (paper section 4)."""
