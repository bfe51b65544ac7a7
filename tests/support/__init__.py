"""Helpers shared by kafkawire's tests (real peers, fixtures)."""
