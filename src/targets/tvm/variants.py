"""The schedule template variants of each TVM target kind (``target.template``); the first is the
default. Kept apart from the templates so that config checks can name them without importing TVM."""

VARIANTS = {"llvm": ("packed", "nchw", "flex"), "cuda": ("direct", "winograd", "flex")}


def template_problem(target_kind: str, name) -> str | None:
    """Why ``name`` is not a template variant of ``target_kind`` (None: it is, or null = the default)."""
    valid = VARIANTS.get(target_kind)
    if valid is None or name in (None, "") or name in valid:
        return None
    return f"is not a template of target {target_kind}; valid: {', '.join(valid)}"
