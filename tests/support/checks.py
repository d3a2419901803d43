"""check() for the Python tests that drive `plume` from outside: a false
condition raises CheckFailed with what was expected, so the test exits
non-zero naming the failed check (an assert would vanish under -O)."""


class CheckFailed(Exception):
    pass


def check(cond, what):
    """Raises with what when cond is false (an assert would vanish under -O)."""
    if not cond:
        raise CheckFailed(what)
