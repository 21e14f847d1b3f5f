"""``method=glimpse``: hardware-spec-aware tuning ([Ahn-PhD] Ch. 4; docs/METHODS.md §glimpse)."""
