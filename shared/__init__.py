"""edgewave shared layer: what agent and cloud both speak. Imports nothing of edgewave."""
