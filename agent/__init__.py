"""The edgewave gateway agent."""
