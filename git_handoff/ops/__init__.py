"""Use cases, one module each. They take a StateStore/Repo and keyword arguments and
return plain data; they never print and never exit."""
