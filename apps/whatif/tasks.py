from celery import shared_task

from apps.whatif.services import advice_runs_request, whatif_run_compute, whatif_runs_expire


# One task per run, in the "whatif" queue: replays never sit in front of ingestion,
# rollups or alerts. A worker that dies mid-run has the task redelivered (acks_late);
# the run's attempts stop one that keeps killing workers.
@shared_task(name="apps.whatif.tasks.compute_whatif_run", ignore_result=True)
def compute_whatif_run(run_id: int) -> None:
    whatif_run_compute(run_id=run_id)


@shared_task(name="apps.whatif.tasks.expire_whatif_runs", ignore_result=True, expires=600)
def expire_whatif_runs() -> None:
    whatif_runs_expire()


# Every few minutes: the lever search behind the advice a run-time client receives.
@shared_task(name="apps.whatif.tasks.request_advice_runs", ignore_result=True, expires=300)
def request_advice_runs() -> None:
    advice_runs_request()
