"""Tests of kafkawire's pytest plugin (``kafkawire.testing``): small test files run with ``pytester``.

The plugin is the installed one, loaded through its ``pytest11`` entry point as in a user's project.
"""
