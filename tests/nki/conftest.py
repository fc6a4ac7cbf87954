from tests.server.conftest import client, start  # noqa: F401 - the server tests' fixtures, reused
