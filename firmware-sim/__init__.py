"""Simulated sensor firmware for edgewave."""
