"""Records: ids are random version-4 UUIDs, never repeated, not even by a forked child; a record's copy
for the log keeps every field and is apart from the session's."""

from __future__ import annotations

import os
import uuid

from toolwise.feedback.records import Execution, new_id, utcnow


def test_ids_are_distinct_version_4_uuids() -> None:
    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    for text in ids[:1_000]:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)


def test_a_forked_child_draws_other_ids_than_its_parent() -> None:
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.write(write, " ".join(new_id() for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    parent = {new_id() for _ in range(10)}
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    assert len(child) == 10
    assert not parent & child


def test_the_copy_of_a_record_keeps_every_field_and_is_apart() -> None:
    now = utcnow()
    record = Execution("t", "s", "sess", False, 2.5, now, now, {"a": 1}, query="q", position=3, error_type="E")
    record.learned(0.25, "ctx")
    copy = record.copy()
    assert copy == record and copy is not record
    record.recorded()
    assert copy.arguments == {"a": 1}
