"""This clone's state: the state store and everything kept beside it (identity, journals,
notices, quarantine, claim index, notes, trust) (see docs/architecture.md)."""
