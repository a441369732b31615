"""Placeholder: being written (see the issues)."""

__all__: list[str] = []
