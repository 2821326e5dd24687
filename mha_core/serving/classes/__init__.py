"""A class's state behind one small interface (serving.classroom.Classroom): SQLite on one machine (on_sqlite), Redis
across hosts (on_redis); what both stores share (stored); the watcher that reruns a process's followers (watch)."""
