"""The phased searcher played without Ray (tests/search/test_phases.py,
test_fusion.py): a fake trial loop stands in for Tune and fake hooks for the
MLflow sweep runs (search/sweep_runs.py)."""
from __future__ import annotations

FINISHED = "FINISHED"  # ray.tune.search.Searcher.FINISHED


def trained_trials(study) -> list:
    """A tpe arm's study trials that were handed out to train, in number order: not the repeats, which
    search/tpe.py tells failed at their ask ("Repeats")."""
    from search.tpe import KEY_ATTR, REPEAT_ATTR

    trials = sorted(study.get_trials(deepcopy=False), key=lambda t: t.number)
    assert all((KEY_ATTR in t.user_attrs) != (REPEAT_ATTR in t.user_attrs) for t in trials)  # each trial one or the other
    assert all(t.state.name == "FAIL" for t in trials if REPEAT_ATTR in t.user_attrs)
    return [t for t in trials if KEY_ATTR in t.user_attrs]


class Hooks:
    def __init__(self):
        self.calls: list[tuple] = []
        self.walls: list[str | None] = []
        self.logs: list[str] = []

    def sweep_started(self, arm, phase, specs, selected):
        self.calls.append(("started", f"{arm.name}/{phase}", len(specs), selected["key"] if selected else None))

    def config_selected(self, arm, best, by_fold=None):
        self.calls.append(("selected", arm.name, best["key"]))

    def sweep_ended(self, result, summary):
        self.calls.append(("ended", result.sweep, len(result.outcomes), dict(summary) if summary else None))

    def wall(self, sweep, seconds):
        assert seconds >= 0
        self.walls.append(sweep)

    def log(self, text):
        self.logs.append(text)


def drive(searcher, record, outcome, concurrency: int = 3, order: str = "oldest", peak: list[int] | None = None) -> list[dict]:
    """Play Tune: keep up to `concurrency` trials running, finish the oldest (or the newest),
    until the searcher says FINISHED (a fused group finishes each of its configs).  Checks on the way that
    phases overlap only where they may (search/phase_plan.py): no re-training trial of an arm is suggested
    while a selection trial of it runs or after one of it is suggested, and none of an arm whose config derives
    from another family's (fixedplus) while a trial of that family runs."""
    from search.strategies import REGISTRY

    running: list[tuple[str, dict]] = []
    suggested: list[dict] = []
    n = 0
    while True:
        answer = None
        while len(running) < concurrency:
            answer = searcher.suggest(f"t{n}")
            if not isinstance(answer, dict):
                break
            spec = answer["spec"]
            if spec["phase"] == "assessment":
                source = REGISTRY[spec["family"]].derived_from
                for _, s in running:
                    assert not (s["strategy"] == spec["strategy"] and s["phase"] == "selection"), f"{spec['strategy']} re-training while its selection runs"
                    assert s["family"] != source, f"{spec['strategy']} re-training while {s['strategy']} {s['phase']} runs"
            else:
                assert not any(s["strategy"] == spec["strategy"] and s["phase"] == "assessment" for s in suggested), \
                    f"{spec['strategy']} selection after its re-training"
            running.append((f"t{n}", spec))
            suggested.append(spec)
            n += 1
        if peak is not None:  # the most trials in flight at once, for the caller
            peak[:] = [max(peak + [len(running)])]
        if not running:
            assert answer == FINISHED, f"the searcher waits ({answer!r}) with nothing running"
            break
        tid, spec = running.pop(0 if order == "oldest" else -1)
        out = None
        for member in spec.get("members") or [spec]:  # a fused group (--fuse): each of its configs but those done
            if member["key"] in (spec.get("done") or ()):
                continue
            key = f"{member['strategy']}/{member['phase']}/{member['key']}"
            out = outcome(member)
            record.reported(key, {"best_val_acc": out.get("best_val_acc"), "epoch": 1})
            record.finished(key, out)
        searcher.on_trial_complete(tid, {"final": out if not spec.get("members") else None})
    searcher.finish_all()
    return suggested
