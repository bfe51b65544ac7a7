"""CRC-32C (Castagnoli) from the ``crc32c`` package's extension module, loaded without the package's ``__init__``.

That ``__init__`` asks ``importlib.metadata`` for the package's own version, which imports the
metadata machinery and scans the installed distributions: tens of milliseconds of every broker's
and client's start-up for a string kafkawire never reads, against under a millisecond for the
extension itself. When the package is laid out differently than expected, it is imported as usual.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys


def _extension():
    name = "crc32c._crc32c"
    module = sys.modules.get(name)
    if module is not None:
        return module
    package = importlib.util.find_spec("crc32c")  # locates the package without running it
    for folder in (package.submodule_search_locations or []) if package is not None else []:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(folder, "_crc32c" + suffix)
            if os.path.exists(path):
                loader = importlib.machinery.ExtensionFileLoader(name, path)
                spec = importlib.util.spec_from_file_location(name, path, loader=loader)
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                # registered under its own name: a later ``import crc32c`` reuses it instead of loading it twice
                sys.modules[name] = module
                return module
    return None


try:
    crc32c = _extension().crc32c
except Exception:  # another layout of the package: the ordinary (slower) import
    from crc32c import crc32c

__all__ = ["crc32c"]
