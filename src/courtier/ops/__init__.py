"""Operators' tools: capacity planning and the configuration reference."""
