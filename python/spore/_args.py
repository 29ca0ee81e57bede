"""One rule for MindSpore arguments Spore has no counterpart for: a call that leaves them at
MindSpore's default (or a value with the same effect) is accepted; any other value is refused with
a NotImplementedError naming the argument, the value and what to do, never silently ignored
(tests/python/test_mindspore_surface.py walks every case)."""

_MISSING = object()


def refuse(who, reason, **given):
    """given: name=(value, accepted) with accepted a value or a tuple of values."""
    for name, (value, accepted) in given.items():
        ok = accepted if isinstance(accepted, tuple) else (accepted,)
        if not any(value is a or (type(value) is type(a) and value == a) for a in ok):
            raise NotImplementedError(f"For '{who}', {name}={value!r} is not supported: {reason}")


def refuse_kwargs(who, kwargs, known=()):
    """**kwargs a function takes for MindSpore's signature: any key not in `known` is refused."""
    extra = sorted(set(kwargs) - set(known))
    if extra:
        raise TypeError(f"For '{who}', unexpected keyword argument(s) {', '.join(map(repr, extra))}"
                        + (f"; known: {', '.join(known)}" if known else ""))
