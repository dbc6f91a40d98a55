"""The phased searcher played without Ray (tests/search/test_phases.py,
test_fusion.py): a fake trial loop stands in for Tune and fake hooks for the
MLflow sweep runs (search/sweep_runs.py)."""
from __future__ import annotations

FINISHED = "FINISHED"  # ray.tune.search.Searcher.FINISHED


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


def drive(searcher, record, outcome, concurrency: int = 3, order: str = "oldest") -> list[dict]:
    """Play Tune: keep up to `concurrency` trials running, finish the oldest (or the newest),
    until the searcher says FINISHED (a fused group finishes each of its configs).  Checks on the way that no trial of a
    later phase is suggested while one of an earlier phase is unfinished."""
    running: list[tuple[str, dict]] = []
    suggested: list[dict] = []
    phase_order = [f"{name}/{ph}" for name, ph in searcher.phases]
    n = 0
    while True:
        answer = None
        while len(running) < concurrency:
            answer = searcher.suggest(f"t{n}")
            if not isinstance(answer, dict):
                break
            spec = answer["spec"]
            sweep = f"{spec['strategy']}/{spec['phase']}"
            for earlier in phase_order[:phase_order.index(sweep)]:
                assert not any(f"{s['strategy']}/{s['phase']}" == earlier for _, s in running), f"{sweep} suggested while {earlier} runs"
            running.append((f"t{n}", spec))
            suggested.append(spec)
            n += 1
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
