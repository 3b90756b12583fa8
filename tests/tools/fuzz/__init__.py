"""Helpers of the tool fuzz (tests/tools/test_tool_fuzz.py)."""
