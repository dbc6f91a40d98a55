"""One typed, flat configuration per training run.

The same dict is the CLI's `--set key=value` target, a grid point, the
MLflow params of a trial and part of every checkpoint.  `TrainConfig.from_dict`
validates everything up front; its errors say where the value came from,
which key, what was expected and what was found.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, fields
from typing import Any, Mapping

__all__ = ["TrainConfig", "ConfigError", "CHOICES", "PROFILES", "PROFILE_KEYS", "MAX_SEED", "profile_values"]

# the largest seed anywhere in the tool (training, data, a strategy's search): numpy's legacy seeding (Optuna's TPE
# sampler) takes no more; torch takes up to 2**64 - 1 (measured: 2**64 raised "Overflow when unpacking long long")
MAX_SEED = 2**32 - 1


class ConfigError(ValueError):
    """A user-supplied configuration value is invalid (one readable line).

    `key`, `expected` and `found` are kept apart so that callers (the grid
    loader) can name the value's place in their own terms."""

    def __init__(self, message: str, key: str | None = None, expected: str | None = None, found: Any = None):
        super().__init__(message)
        self.key = key
        self.expected = expected
        self.found = found


CHOICES: dict[str, tuple[str, ...]] = {
    "model": ("fixed", "awnn"),
    "activation": ("relu", "leaky_relu", "relu6", "tanh", "gelu"),
    "optimizer": ("adam", "sgd"),
    "split": ("inner", "outer"),
    "weight_prior": ("gaussian", "uninformative"),
    "rate_prior": ("uninformative", "gaussian"),
    "init": ("kaiming", "kaiming+"),
    "init_distribution": ("gaussian", "uniform"),
    "grow_init": ("normal", "kaiming+"),
    "on_max_width": ("stop", "cap"),
    "device": ("auto", "cpu", "cuda"),
    "lr_schedule": ("none", "multistep", "plateau"),
    "select_metric": ("acc", "loss"),
    "augment": ("none", "crop", "crop_flip"),
    "pooling": ("sum", "mean"),
    "readout_norm": ("none", "batch"),
    "tokenizer": ("auto", "word", "gpt2"),
    "awnn_profile": ("authors", "paper-text"),
    "width_rule": ("ceil", "floor+2"),
    "bias_init": ("zero", "uniform"),
    "best_epoch_ties": ("lower_loss", "later"),
}

# What the two profiles set (docs/design.md, "Profiles").  `paper-text` is the
# paper's equations as printed, this project's behaviour before profiles
# existed; `authors` is what the paper's authors ran (their public release,
# read for facts: issue #14).  Every key can also be set on its own; a key
# left unset (None) takes its profile's value when the config is built, so
# the resolved value is what a trial records.
PROFILE_KEYS = (
    "renormalise_importances",  # divide (f(j) + 1e-6) by its sum over the D kept neurons
    "width_rule",  # D = ceil(-ln(1-k)/rate) or floor(-ln(1-k)/rate) + 2
    "prior_on_readout",  # p(theta) also on the read-out layer
    "n_obs",  # N of the ELBO's prior terms; 0 = the training-set size
    "rate_prior", "rate_prior_mean", "rate_prior_std",
    "rate_min",  # lower bound on the rate (0 = none)
    "reset_optimizer_on_resize",  # a width change restarts the optimiser state of the two layers it touches
    "bias_init",  # zero, or U(+-1/sqrt(fan_in)) with new neurons' biases N(0, 1)
    "best_epoch_ties",  # equal val accuracy: the lower val loss, or the later epoch
)
# the synthetic tasks whose configs the authors ran with n_obs = 2000
_AUTHORS_SYNTHETIC = ("doublemoon", "spiral", "spiralhard")
PROFILES: dict[str, dict[str, Any]] = {
    "paper-text": {
        "renormalise_importances": False, "width_rule": "ceil", "prior_on_readout": False, "n_obs": 0,
        "rate_prior": "uninformative", "rate_prior_mean": 0.05, "rate_prior_std": 1.0, "rate_min": 0.0,
        "reset_optimizer_on_resize": False, "bias_init": "zero", "best_epoch_ties": "lower_loss",
    },
    "authors": {
        "renormalise_importances": True, "width_rule": "floor+2", "prior_on_readout": True, "n_obs": 0,
        "rate_prior": "uninformative", "rate_prior_mean": 0.05, "rate_prior_std": 1.0, "rate_min": 0.0,
        "reset_optimizer_on_resize": True, "bias_init": "uniform", "best_epoch_ties": "later",
    },
}
# per-task values of the `authors` profile (their dataset configs)
_AUTHORS_TASK = {
    "doublemoon": {"n_obs": 2000},
    "spiral": {"n_obs": 2000},
    # SpiralHard: a Gaussian rate prior centred on the starting rate, and a lower bound on the rate
    "spiralhard": {"n_obs": 2000, "rate_prior": "gaussian", "rate_prior_mean": 0.01, "rate_prior_std": 0.01, "rate_min": 0.0005},
}


def profile_values(profile: str, task: str) -> dict[str, Any]:
    """Every PROFILE_KEYS value of `profile` for `task`."""
    if profile not in PROFILES:
        raise ConfigError(f"Could not resolve awnn_profile {profile!r} among choices {list(PROFILES)}.", "awnn_profile", f"one of {list(PROFILES)}", profile)
    values = dict(PROFILES[profile])
    if profile == "authors":
        values.update(_AUTHORS_TASK.get(task, {}))
    return values


# which keys apply where (TrainConfig.applicable); every key is in exactly one group, or is one of the optimiser's,
# the schedule's or `width` (tests/awnn/test_config.py checks the partition)
# The real-valued keys the model holds as tensors, and the range they must lie in.  A model computes in float32
# (largest 3.4e38) with these values and with what it derives from them (rho ~ the rate, the weight prior's decay
# 1 / (sigma_theta^2 N), the rate prior's 1 / (std^2 N)): a rate of 1e39 or a sigma_theta of 1e-39 overflowed while
# the model was built, a traceback instead of this error.  The range is far wider than any run uses.  The
# optimiser's numbers (lr, adam_eps, momentum, weight_decay, lr_gamma) only need to be finite: Adam and SGD take
# them as host scalars, and a huge lr diverges the run, which the trainer reports (tests use lr=1e20 to make one).
POSITIVE_NUMBER_KEYS = ("rate", "sigma_theta", "rate_prior_std", "compress_std_start", "compress_std_end")
NON_NEGATIVE_NUMBER_KEYS = ("rate_prior_mean", "compress_rate_mean", "rate_min")
NUMBER_MIN, NUMBER_MAX = 1e-18, 1e18

COMMON_KEYS = ("task", "model", "hidden_layers", "activation", "optimizer", "lr", "weight_decay", "lr_schedule", "batch_size",
               "epochs", "patience", "seed", "split", "data_seed", "data_root", "device", "threads", "select_metric",
               "init_distribution", "max_train_examples", "best_epoch_ties")
# task table's keys (awnn/data/table.py): which column of a CSV file is the class, which are left out; set by the command
# for every trial (--label, --drop-columns), shown and allowed for task table only
TABLE_KEYS = ("label", "drop_columns")

# how `drop_columns` (--drop-columns) writes its column names: as a CSV row writes cells, so that a name with a comma
# is one name in double quotes, 'id,"Name, full"' (a header cell is written so too)
COLUMNS_FORMAT = "column names separated by commas (a name with a comma in double quotes: 'id,\"Name, full\"')"


def column_list(text: str) -> list[str]:
    """The column names a `drop_columns` value writes (COLUMNS_FORMAT), each stripped; '' (or spaces): none.  A
    ValueError says what is wrong with it: an empty name (a stray comma), a quote left open, text after a closing quote,
    more than one line."""
    import csv

    if not (text or "").strip():
        return []
    if "\n" in text or "\r" in text:
        raise ValueError("more than one line")
    try:
        rows = list(csv.reader([text], skipinitialspace=True, strict=True))
    except csv.Error as e:
        raise ValueError(f"a double quote that does not enclose a whole name ({e})") from None
    names = [n.strip() for n in rows[0]] if rows else []
    for i, name in enumerate(names):
        if not name:
            raise ValueError(f"an empty column name (item {i + 1} of {len(names)}: a stray comma, or an unset shell variable?)")
    return names


def column_text(names: "list[str] | tuple[str, ...]") -> str:
    """The `drop_columns` value that `column_list` reads back as `names`: joined by commas, a name with a comma or a
    double quote in double quotes (plain names as they are: 'sample,note')."""
    import csv
    import io

    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(names)
    return out.getvalue()
DOMAIN_KEYS = {
    "tabular": TABLE_KEYS,
    "image": ("augment",),
    "graph": ("conv_layers", "pooling", "readout_norm", "embed_dim", "fold", "dropout"),
    "text": ("d_model", "heads", "encoder_layers", "decoder_layers", "max_len", "tokenizer", "dropout"),
}
AWNN_KEYS = ("awnn_profile", "rate", "quantile_k", "weight_prior", "sigma_theta", "scale_free_weights", "init", "grow_init",
             "width_update_interval", "max_width", "on_max_width", "compress_start_epoch")
COMPRESSION_KEYS = ("compress_end_epoch", "compress_rate_mean", "compress_std_start", "compress_std_end")
OPTIMISER_KEYS = ("momentum", "adam_eps", "lr_milestones", "lr_gamma", "width", "layer_widths")


@dataclass
class TrainConfig:
    # what to train
    task: str = "spiralhard"
    model: str = "awnn"  # fixed | awnn
    hidden_layers: int = 1
    width: int = 64  # fixed model: neurons per hidden layer
    layer_widths: str = ""  # fixed MLP: one width per hidden layer, e.g. "120,64" (overrides width; fixedplus per-layer)
    activation: str = "relu"
    # optimisation
    optimizer: str = "adam"
    lr: float = 0.01
    momentum: float = 0.9  # sgd only
    weight_decay: float = 0.0  # plain L2 on non-adaptive parameters
    lr_schedule: str = "none"
    lr_milestones: str = ""  # multistep: comma-separated epochs, e.g. "50,100,150"
    lr_gamma: float = 0.1  # multistep factor / plateau factor
    batch_size: int = 128
    epochs: int = 100
    patience: int = 0  # stop after this many epochs without a better val score; 0 = never
    seed: int = 0
    # data
    split: str = "outer"  # inner: model selection (90/10); outer: risk assessment (70/10/20)
    data_seed: int = 0
    data_root: str = "data"
    label: str = ""  # task table: the class label's column in the CSV file (--label); '' = the last column
    drop_columns: str = ""  # task table: columns of the CSV file left out, comma-separated (--drop-columns); '' = none
    # AWNN (model=awnn)
    # every PROFILE_KEYS entry below defaults to None: its value comes from awnn_profile
    awnn_profile: str = "authors"  # authors | paper-text (see PROFILES)
    rate: float = 0.01  # starting rate of every adaptive layer
    quantile_k: float = 0.9
    weight_prior: str = "gaussian"
    sigma_theta: float = 1.0
    prior_on_readout: bool | None = None  # paper-text: Eq. 13's p(theta) on the adaptive layers only
    n_obs: int | None = None  # N dividing the prior terms of the loss; 0 = the training-set size
    rate_prior: str | None = None
    rate_prior_mean: float | None = None
    rate_prior_std: float | None = None
    rate_min: float | None = None  # lower bound on every rate (0 = none)
    renormalise_importances: bool | None = None
    width_rule: str | None = None
    reset_optimizer_on_resize: bool | None = None
    bias_init: str | None = None
    best_epoch_ties: str | None = None
    # beyond the paper (issue #14): weights fed by an adaptive layer stored in units of
    # their kaiming+ scale, W = c V with c = sqrt(2 / sum p^2) (AdaptiveMLP's scale_free)
    scale_free_weights: bool = False
    init: str = "kaiming+"
    init_distribution: str = "gaussian"
    grow_init: str = "normal"
    width_update_interval: int = 1  # steps between width updates (1 = the paper)
    max_width: int = 4096
    on_max_width: str = "stop"  # stop the run (status width_capped) or cap and go on
    # online compression (paper section 5.3); compress_start_epoch = 0 disables it
    compress_start_epoch: int = 0
    compress_end_epoch: int = 0
    compress_rate_mean: float = 0.05
    compress_std_start: float = 1.0
    compress_std_end: float = 0.1
    # where it runs
    device: str = "auto"
    threads: int = 0  # torch intra-op threads; 0 = leave as is
    # model selection: the best epoch has the highest val accuracy (acc) or the lowest val loss (loss)
    select_metric: str = "acc"
    adam_eps: float = 1e-8  # Adam's epsilon (the paper's Transformer: 5e-9)
    dropout: float = 0.0  # GIN read-out dropout; Transformer dropout (paper: 0.1)
    # images (ResNet-20): width 0 with model=fixed is a linear classifier (Table 4)
    augment: str = "none"  # training batches only: random crop (padding 4) and/or horizontal flip
    # graphs (GIN)
    conv_layers: int = 2  # GINConv layers after the input MLP
    pooling: str = "sum"  # global pooling of node embeddings
    readout_norm: str = "none"  # batch: BatchNorm of each pooled graph embedding before its read-out (REDDIT-BINARY's grids)
    embed_dim: int = 0  # node-embedding size between convolutions; 0 = width (fixed) or 64 (awnn)
    fold: int = 0  # outer fold of the stratified 10-fold CV (Errica et al. 2020), 0..9
    # every domain: train on at most this many examples of the split's training part (0: all); a stratified
    # subset drawn from data_seed.  The CPU budgets (quick, smoke) set it for the large real datasets (grid key `cpu`)
    max_train_examples: int = 0
    # text (Transformer)
    d_model: int = 512
    heads: int = 8
    encoder_layers: int = 6
    decoder_layers: int = 6
    max_len: int = 128  # tokens per sentence, special tokens included
    tokenizer: str = "auto"  # auto: gpt2 when its files are under data_root, else word (built from training text)

    # ------------------------------------------------------------------
    def __post_init__(self) -> None:
        """Fill the PROFILE_KEYS left unset from `awnn_profile` (an unknown
        profile is left for `validate` to report)."""
        unset = [k for k in PROFILE_KEYS if getattr(self, k) is None]
        self.__dict__["_from_profile"] = frozenset(unset)
        if unset and self.awnn_profile in PROFILES:
            values = profile_values(self.awnn_profile, self.task)
            for k in unset:
                setattr(self, k, values[k])

    def explicit_profile_keys(self) -> list[str]:
        """The PROFILE_KEYS set explicitly (not taken from the profile)."""
        return [k for k in PROFILE_KEYS if k not in self.__dict__.get("_from_profile", ())]

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_dict(cls, values: Mapping[str, Any], source: str = "config") -> "TrainConfig":
        """Build and validate a config; strings are coerced (for --set and YAML)."""
        known = {f.name: f for f in fields(cls)}
        kwargs = {}
        for key, value in values.items():
            if key not in known:
                hint = difflib.get_close_matches(key, list(known), n=1)
                did = f" (did you mean {hint[0]!r}?)" if hint else ""
                raise ConfigError(f"{source}: unknown key {key!r}{did}; expected one of: {', '.join(known)}", key, f"a known key{did}", key)
            kwargs[key] = _coerce(key, value, known[key].type, source)
        cfg = cls(**kwargs)
        cfg.validate(source)
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def applicable(self, kind: str) -> dict[str, Any]:
        """The keys that apply to this model on a task of `kind` (tabular |
        image | graph | text), with their values: what a trial run shows as
        params.  Left out: the other domains' keys, the AWNN keys of a fixed
        model and the fixed width of an AWNN one, an optimiser's or a
        schedule's keys when another is used, online compression's when it is
        off.  `to_dict` keeps every key (the checkpoint holds it)."""
        keys = [k for k in COMMON_KEYS]
        keys += [k for k in DOMAIN_KEYS.get(kind, ()) if k not in TABLE_KEYS or self.task == "table"]  # (the generated tasks have no file)
        if self.model == "awnn":
            keys += list(AWNN_KEYS) + list(PROFILE_KEYS)
            if self.compress_start_epoch > 0:
                keys += list(COMPRESSION_KEYS)
        else:
            keys += ["width"] + (["layer_widths"] if self.layer_widths else [])
        keys += {"sgd": ["momentum"], "adam": ["adam_eps"]}.get(self.optimizer, [])
        keys += {"multistep": ["lr_milestones", "lr_gamma"], "plateau": ["lr_gamma"]}.get(self.lr_schedule, [])
        values = self.to_dict()
        return {k: values[k] for k in dict.fromkeys(keys)}

    def unused_reason(self, key: str, kind: str) -> str | None:
        """Why `key` changes nothing in this config on a task of `kind` (not among `applicable(kind)`), in words; None
        where it applies."""
        if key in self.applicable(kind):
            return None
        if key in AWNN_KEYS or key in PROFILE_KEYS or key in COMPRESSION_KEYS:
            if self.model != "awnn":
                return f"an AWNN key, and the model is {self.model}"
            return "online compression is off (compress_start_epoch 0)"
        if key in ("width", "layer_widths"):
            return "an AWNN model learns its widths" if self.model == "awnn" else "layer_widths is not set"
        if key in ("momentum", "adam_eps"):
            return f"optimizer {self.optimizer} does not use it"
        if key in ("lr_milestones", "lr_gamma"):
            return f"lr_schedule {self.lr_schedule} does not use it"
        if key in TABLE_KEYS:
            return f"task {self.task} has no CSV file (task table only)"
        return f"task {self.task} ({kind}) does not use it"

    def replace(self, **changes: Any) -> "TrainConfig":
        """A copy with `changes`; keys that came from the profile are resolved
        again (so replacing `awnn_profile` or `task` re-resolves them)."""
        base = {k: v for k, v in self.to_dict().items() if k not in self.__dict__.get("_from_profile", ())}
        return TrainConfig.from_dict({**base, **changes})

    def validate(self, source: str = "config") -> None:
        def bad(key: str, expected: str) -> ConfigError:
            found = getattr(self, key)
            return ConfigError(f"{source}: key {key!r}: expected {expected}, found {found!r}", key, expected, found)

        from .data import TASKS  # late: data may register more tasks

        if self.task not in TASKS:
            raise bad("task", f"one of {sorted(TASKS)}")
        if self.awnn_profile not in PROFILES:  # first: the profile keys it fills are unset otherwise
            raise bad("awnn_profile", f"one of {list(PROFILES)}")
        for key, choices in CHOICES.items():
            if getattr(self, key) not in choices:
                raise bad(key, f"one of {list(choices)}")
        positive_int = ["batch_size", "epochs", "width_update_interval", "max_width", "conv_layers", "d_model", "heads", "encoder_layers", "decoder_layers"]
        for key in positive_int:
            if getattr(self, key) < 1:
                raise bad(key, "an integer >= 1")
        for key in ["patience", "threads", "seed", "data_seed", "compress_start_epoch", "compress_end_epoch", "embed_dim", "n_obs", "max_train_examples"]:
            if getattr(self, key) < 0:
                raise bad(key, "an integer >= 0")
        for key in ["seed", "data_seed"]:
            if getattr(self, key) > MAX_SEED:
                raise bad(key, f"an integer from 0 to {MAX_SEED}")
        if self.width < (0 if self.model == "fixed" else 1):
            raise bad("width", "an integer >= 1 (0, a linear classifier, only with model=fixed)")
        if self.layer_widths:
            parts = str(self.layer_widths).split(",")
            if self.model != "fixed" or not all(p.strip().isdigit() and int(p) >= 1 for p in parts) or len(parts) != self.hidden_layers:
                raise bad("layer_widths", f"with model=fixed, {self.hidden_layers} comma-separated integers >= 1 (one per hidden layer), "
                                          f"or empty")
        from .data.checks import url_problem

        url = url_problem(self.data_root)
        if url:
            raise bad("data_root", url.split("; expected ", 1)[1])
        for key in TABLE_KEYS:
            if getattr(self, key) and self.task != "table":
                raise bad(key, "'' (a CSV file's columns are named only for task table)")
        if self.label != self.label.strip() or "\n" in self.label:
            raise bad("label", "a column name as the CSV header writes it (no leading or trailing spaces, one line)")
        try:
            column_list(self.drop_columns)
        except ValueError as e:
            raise bad("drop_columns", f"{COLUMNS_FORMAT}, as the CSV header writes them, or '' (this one has {e})") from None
        if not 0 <= self.fold <= 9:
            raise bad("fold", "an outer fold in 0..9")
        if self.max_len < 3:
            raise bad("max_len", "an integer >= 3 (two special tokens and one word)")
        if self.d_model % self.heads:
            raise bad("d_model", f"a multiple of heads={self.heads}")
        if not 0.0 <= self.dropout < 1.0:
            raise bad("dropout", "a number in [0, 1)")
        min_layers = 1 if self.model == "awnn" else 0
        if self.hidden_layers < min_layers:
            raise bad("hidden_layers", f"an integer >= {min_layers} for model={self.model}")
        for key in ["lr", "adam_eps"]:
            v = getattr(self, key)
            if not (v > 0 and math.isfinite(v)):
                raise bad(key, "a positive number")
        for key in ["momentum", "weight_decay", "lr_gamma"]:
            v = getattr(self, key)
            if not (v >= 0 and math.isfinite(v)):
                raise bad(key, "a number >= 0")
        for key in POSITIVE_NUMBER_KEYS:
            v = getattr(self, key)
            if not (NUMBER_MIN <= v <= NUMBER_MAX):
                raise bad(key, f"a positive number from {NUMBER_MIN:g} to {NUMBER_MAX:g}")
        for key in NON_NEGATIVE_NUMBER_KEYS:
            v = getattr(self, key)
            if not (v == 0 or NUMBER_MIN <= v <= NUMBER_MAX):
                raise bad(key, f"0 or a number from {NUMBER_MIN:g} to {NUMBER_MAX:g}")
        if not 0.0 < self.quantile_k < 1.0:
            raise bad("quantile_k", "a number in the open interval (0, 1)")
        if self.compress_start_epoch and self.compress_end_epoch < self.compress_start_epoch:
            raise bad("compress_end_epoch", f"an epoch >= compress_start_epoch={self.compress_start_epoch}")
        if self.lr_schedule == "multistep":
            try:
                self.milestones()
            except ValueError:
                raise bad("lr_milestones", "comma-separated positive epochs such as '50,100,150'") from None

    def milestones(self) -> list[int]:
        if not self.lr_milestones.strip():
            return []
        out = [int(s) for s in self.lr_milestones.split(",")]
        if any(m < 1 for m in out):
            raise ValueError
        return out

    @property
    def adaptive(self) -> bool:
        return self.model == "awnn"


def _coerce(key: str, value: Any, typ: Any, source: str) -> Any:
    if isinstance(typ, str) and typ.endswith(" | None"):  # a profile key: None or "profile" = from the profile
        if value is None or (isinstance(value, str) and value.lower() == "profile"):
            return None
        typ = typ[: -len(" | None")]
    typ = {"int": int, "float": float, "str": str, "bool": bool}.get(typ, typ) if isinstance(typ, str) else typ
    try:
        if typ is bool:
            if isinstance(value, str):
                if value.lower() in ("1", "true", "yes", "on"):
                    return True
                if value.lower() in ("0", "false", "no", "off"):
                    return False
                raise ValueError
            return bool(value)
        if typ is int:
            if isinstance(value, bool):
                raise ValueError
            if isinstance(value, float):
                if not value.is_integer():
                    raise ValueError
                return int(value)
            return int(value)
        if typ is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if typ is str:
            if not isinstance(value, (str, int, float)) or isinstance(value, bool):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: key {key!r}: expected {typ.__name__}, found {value!r}", key, typ.__name__, value) from None
    return value
