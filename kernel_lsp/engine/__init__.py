"""Jobs and where they run: the workspace index, file reading and watching, the scheduler.

Knows nothing of the Language Server Protocol: the CLI and the server drive the same engine.
"""
