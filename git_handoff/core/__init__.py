"""Pure core: the records, their checks, the merge, task selection and rendering; no git,
no files, no processes (see docs/architecture.md)."""
