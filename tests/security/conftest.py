"""Certificates for the security tests: one throwaway CA per session (``kafkawire certs``'s code)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    from kafkawire.security.certs import create

    directory = tmp_path_factory.mktemp("certs")
    create(str(directory), password="kafkawire")
    return directory
