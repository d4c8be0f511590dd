"""Progress store: learners and their append-only events (SQLAlchemy 2, Alembic migrations).

CONTRACT (store helper):
    store/db.py:      make_engine(url: str) -> Engine   # SQLite: WAL + foreign keys on connect
                      upgrade(url: str) -> None          # alembic upgrade head, programmatic
    store/tables.py:  the typed declarative models (learners, events); migrations/ builds them
                      (0001 the tables, 0002 an index on events (kind, learner_id, id),
                      0003 learners.created_by, an HMAC of the address that started them)
    store/events.py:  the Store of learners' events. The events themselves, EventKind and
                      Event, live in normdive.progress.events (the store depends on progress,
                      never the reverse) and are imported from there:
                      class EventKind(StrEnum): PREREQUISITE_DONE, PREDICTION_COMMITTED,
                          NUMBERS_CHECKED, READING_LOCKED, TAKEAWAY_SAVED
                          ROW_PREDICTED, ROW_PLAYED, HINT_OPENED
                      @dataclass(frozen=True) class Event:
                          id: int; learner_id: str; kind: EventKind; payload: dict[str, Any];
                          created_at: datetime   # server time, UTC
                      class Store:
                          def __init__(self, engine: Engine)
                          def create_learner(self) -> str            # 32 hex chars, 128 random bits
                          def ensure_learner(self, learner_id: str,
                                             created_by: str | None = None) -> bool
                              # stores a minted id unless stored; True when this call stored it
                          def learner_exists(self, learner_id: str) -> bool
                          def append(self, learner_id: str, kind: EventKind,
                                     payload: Mapping[str, Any]) -> Event
                          def events_for(self, learner_id: str) -> list[Event]  # in order
                          def prediction_counts(self) -> PredictionCounts  # all learners'
                              # first predictions, bare counts (progress.aggregate)
                      append raises UnknownLearner (a LookupError) for an id not in the store
                      and ValueError for a payload JSON cannot hold; NUL and lone surrogates
                      in strings become U+FFFD (PostgreSQL JSONB refuses them).
    store/prerequisite.py: record_prerequisite_done(store, learner_id, source) -> bool
                      # True: already recorded; what `normdive prerequisite done` and
                      # POST /api/prerequisite both call
No SQLite-only SQL: everything must run on PostgreSQL too.
"""
