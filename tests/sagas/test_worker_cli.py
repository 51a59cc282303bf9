"""`plnt worker` polls the task queue the sagas are started on."""

from __future__ import annotations


def test_the_cli_default_task_queue_is_the_sagas_task_queue() -> None:
    from plnt.cli import worker
    from plnt.sagas import values

    assert worker.TASK_QUEUE == values.TASK_QUEUE
