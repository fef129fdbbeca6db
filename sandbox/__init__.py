"""Execution backends: the worker that runs inside the sandbox, and the process and docker backends."""
