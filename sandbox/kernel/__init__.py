"""The kernel mechanisms the worker sets up: isolation (rlimits, privileges), memory cgroups, namespaces, seccomp."""
