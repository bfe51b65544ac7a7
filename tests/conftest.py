"""Shared pytest setup for kafkawire's tests.

Kept minimal: subdirectories add their own fixtures in their own conftest.py.
This file's presence puts ``tests/`` on ``sys.path`` so that test modules can
import the helpers in ``tests/support``.
"""
