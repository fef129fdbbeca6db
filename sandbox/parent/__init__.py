"""The parent's side of the sandbox: the backends (process, docker, fake) and the pool that drives their workers."""
