"""Each AWNN selection config's learned width, best inner validation accuracy and device-seconds, over draws.

Reads the MLflow stores of comparisons (one per draw: `--train-seed S`) and prints, per config of the AWNN arm's
grid (hidden layers, activation, sigma_theta, ...), the values of every draw, then one JSON object as its last line:
`rows` (per config: the draws' width_total, best_val_acc_pct, device_s, statuses) and `device_s_by_group` (the
selection device-seconds over all draws of the configs with sigma_theta 1, those with a bounded activation (ReLU6)
and the rest), with each group's share.

Usage:  python benchmarks/widths_by_config.py draw0=sqlite:///a/mlflow.db draw1=sqlite:///b/mlflow.db ... [--arm awnn]
                                                [--out FILE]
"""
from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tracking import contract as C  # noqa: E402
from tracking.fmt import json_text  # noqa: E402

KEYS = ("hidden_layers", "activation", "sigma_theta")


def _parse(pairs: list[str]) -> dict[str, str]:
    stores = {}
    for p in pairs:
        name, sep, uri = p.partition("=")
        if not sep or not name or not uri:
            raise SystemExit(f"expected NAME=TRACKING_URI, found {p!r}")
        stores[name] = uri
    return stores


def read(stores: dict[str, str], arm: str = "awnn") -> list[dict]:
    """Per config (KEYS), each draw's (width_total, best_val_acc %, device-s, status) of its selection trial."""
    seen: dict[tuple, dict] = collections.defaultdict(dict)
    for name, uri in stores.items():
        client = C.client(uri)
        query = (f"tags.`{C.Tag.KIND}` = 'trial' and tags.`{C.Tag.ARM}` = '{arm}' and tags.`{C.Tag.PHASE}` = 'selection'")
        experiments = [e.experiment_id for e in client.search_experiments()]
        for r in client.search_runs(experiments, query, max_results=50000):
            p, m = r.data.params, r.data.metrics
            key = tuple(p.get(k, "") for k in KEYS)
            seen[key][name] = {"width_total": int(m.get("width_total", 0)), "best_val_acc_pct": round(100 * m.get("best_val_acc", 0.0), 1),
                               "device_s": round(3600 * m.get("device_hours", 0.0), 1), "status": r.data.tags.get(C.Tag.STATUS)}
    rows = []
    for key in sorted(seen, key=lambda k: (int(k[0] or 0), k[1], -float(k[2] or 0))):
        draws = seen[key]
        names = [n for n in stores if n in draws]
        rows.append({**dict(zip(KEYS, key)), "draws": names,
                     **{f: [draws[n][f] for n in names] for f in ("width_total", "best_val_acc_pct", "device_s")},
                     "statuses": sorted({str(draws[n]["status"]) for n in names})})
    return rows


def group(row: dict) -> str:
    if float(row["sigma_theta"] or 0) == 1.0:
        return "sigma_theta_1"
    return "bounded_relu6" if row["activation"] == "relu6" else "unbounded"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("stores", nargs="+", help="NAME=TRACKING_URI, one per draw")
    ap.add_argument("--arm", default="awnn")
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    stores = _parse(a.stores)
    rows = read(stores, a.arm)
    if not rows:
        raise SystemExit(f"no selection trials of arm {a.arm!r} in {', '.join(stores.values())}")
    totals: collections.Counter = collections.Counter()
    for r in rows:
        print(f"{r['hidden_layers']} layer(s) {r['activation']:<10} sigma_theta {r['sigma_theta']:<6} width {r['width_total']}  "
              f"val % {r['best_val_acc_pct']}  device-s {r['device_s']}  {','.join(r['statuses'])}")
        totals[group(r)] += sum(r["device_s"])
    whole = sum(totals.values()) or 1.0
    out = {"stores": {n: C.redact_uri(u) for n, u in stores.items()}, "arm": a.arm, "rows": rows,
           "device_s_by_group": {g: {"device_s": round(v, 1), "share": round(v / whole, 3)} for g, v in sorted(totals.items())}}
    text = json_text(out)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
