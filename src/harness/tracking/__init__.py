"""MLflow tracking: the run's tracker (:mod:`.tracker`), the spool that keeps calls while a server
is down (:mod:`.spool`), a PostgreSQL-backed tracking server (:mod:`.server`)."""
