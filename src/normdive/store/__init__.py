"""Progress store: learners and their append-only events (SQLAlchemy 2, Alembic migrations).

    store/db.py:          make_engine(url) -> Engine (SQLite: WAL, foreign keys, busy timeout,
                          a read-only view of the file renewed once it can be written;
                          PostgreSQL: psycopg 3, connect and lock timeouts, an idle
                          connection's socket checked at checkout, sessions that began
                          read-only replaced);
                          upgrade(url); DATABASE_ERRORS, what a failing database raises (the
                          web app's 503)
    store/tables.py:      the typed declarative models (learners, events, and the lti_*
                          tables normdive.lti keeps); the migrations under migrations/ build
                          exactly these (0001 the tables, 0002 an index on events (kind,
                          learner_id, id), 0003 learners.created_by, an HMAC of the address
                          that started them, 0004 the LTI tables)
    store/event_store.py: Store, the learners and their events. It reads a learner's history
                          in order, appends what a decision over that history says
                          (append_decided: a compare-and-append, so a once-only fact is
                          stored once under any concurrency), stores a learner on their
                          first write (ensure_learner) and counts every learner's first
                          predictions (prediction_counts, bare counts, per pool: a course or
                          the learners no LMS launched). The events
                          themselves, Event and EventKind, live in normdive.progress.events:
                          the store depends on progress, never the reverse.
    store/prerequisite.py: record_prerequisite_done(store, learner_id, source), which both
                          `normdive prerequisite done` and POST /api/prerequisite call

No SQLite-only SQL: everything runs on PostgreSQL too.
"""
