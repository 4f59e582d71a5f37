"""The boundary to the outside: the one place that talks to git, files written atomically,
process trees, a task's commands, the work tree (see docs/architecture.md)."""
