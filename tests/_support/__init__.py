"""Helpers shared by test folders (importable as ``_support``: tests/conftest.py puts tests/ on sys.path)."""
