"""--resume closes every run an earlier driver left open, including a trial
whose ending it had tagged (awnn.status=ok) but whose run it had not closed
when it was killed: the run is finished, not left RUNNING, and the trial
counts as done.  Real MLflow (SQLite), no Ray."""
from __future__ import annotations

from search.resume import read_prior_attempts
from tracking.contract import Tag, client
from tracking.store import TrackingWriter, init_tracking


def test_a_trial_tagged_ended_but_left_running_is_closed(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    init_tracking(uri)
    w = TrackingWriter(uri, "awnn-doublemoon")
    common = {Tag.COMPARISON: "c1"}
    w.start_run("cmp", "compare-c1", tags={**common, Tag.KIND: "comparison", Tag.KEY: "cmp"})
    w.start_run("awnn/selection", "awnn-selection", parent="cmp", tags={**common, Tag.KIND: "sweep", Tag.KEY: "awnn/selection"})
    for key, status in (("sel-0000", "ok"), ("sel-0001", "failed"), ("sel-0002", "running")):
        wk = f"awnn/selection/{key}"
        w.start_run(wk, key, parent="awnn/selection", tags={**common, Tag.KIND: "trial", Tag.KEY: wk, Tag.TRIAL_KEY: key, Tag.STATUS: status})
    assert w.flush(timeout=30)
    exp = w.experiment_id
    prior = read_prior_attempts(client(uri), exp, "c1", w, lambda key, group: None, lambda line: None)
    assert w.flush(timeout=30)
    runs = {r.data.tags.get(Tag.TRIAL_KEY): r for r in client(uri).search_runs([exp], filter_string=f"tags.`{Tag.KIND}` = 'trial'")}
    assert runs["sel-0000"].info.status == "FINISHED" and runs["sel-0001"].info.status == "FAILED"
    assert runs["sel-0002"].info.status == "KILLED" and runs["sel-0002"].data.tags[Tag.STATUS] == "interrupted"
    assert set(prior.finished) == {"awnn/selection/sel-0000", "awnn/selection/sel-0001"} and set(prior.reruns) == {"awnn/selection/sel-0002"}
    w.close(timeout=30)
