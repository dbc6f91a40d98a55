"""TrainConfig: defaults, coercion, and one readable error per bad value."""
import pytest

from awnn.config import NON_NEGATIVE_NUMBER_KEYS, NUMBER_MAX, NUMBER_MIN, POSITIVE_NUMBER_KEYS, ConfigError, TrainConfig


def test_train_config_defaults_match_paper_awnn_tabular_setup():
    c = TrainConfig.from_dict({})
    assert (c.model, c.rate, c.quantile_k, c.lr, c.batch_size, c.sigma_theta) == ("awnn", 0.01, 0.9, 0.01, 128, 1.0)
    assert c.width_update_interval == 1
    # the default task is SpiralHard and the default profile `authors`, whose
    # SpiralHard configs put a Gaussian prior on the rate; paper-text's is uninformative
    assert c.awnn_profile == "authors" and (c.rate_prior, c.rate_prior_mean, c.rate_prior_std) == ("gaussian", 0.01, 0.01)
    assert TrainConfig.from_dict({"awnn_profile": "paper-text"}).rate_prior == "uninformative"
    assert c.adaptive and not TrainConfig.from_dict({"model": "fixed"}).adaptive


def test_train_config_coerces_strings_from_command_line():
    c = TrainConfig.from_dict({"epochs": "7", "lr": "0.05", "rate": "1e-2", "hidden_layers": 2.0, "activation": "relu6"})
    assert (c.epochs, c.lr, c.rate, c.hidden_layers, c.activation) == (7, 0.05, 0.01, 2, "relu6")
    assert isinstance(c.epochs, int) and isinstance(c.lr, float)


def test_train_config_round_trips_through_dict():
    c = TrainConfig.from_dict({"task": "spiral", "hidden_layers": 3, "sigma_theta": 10})
    assert TrainConfig.from_dict(c.to_dict()) == c
    assert c.replace(lr=0.1).lr == 0.1 and c.lr == 0.01


@pytest.mark.parametrize(
    "values, message",
    [
        ({"task": "moons"}, r"^config: key 'task': expected one of \[.*'doublemoon', .*'spiral', .*'spiralhard'.*\], found 'moons'$"),
        ({"activation": "swish"}, r"key 'activation': expected one of \['relu', 'leaky_relu', 'relu6', 'tanh', 'gelu'\], found 'swish'"),
        ({"optimizer": "rmsprop"}, r"key 'optimizer': expected one of \['adam', 'sgd'\], found 'rmsprop'"),
        ({"quantile_k": 1.0}, r"key 'quantile_k': expected a number in the open interval \(0, 1\), found 1.0"),
        ({"quantile_k": 0}, r"key 'quantile_k': expected a number in the open interval \(0, 1\), found 0.0"),
        ({"quantile_k": -0.5}, r"key 'quantile_k': .*found -0.5"),
        ({"width": -3}, r"key 'width': expected an integer >= 1.*found -3"),
        ({"epochs": 0}, r"key 'epochs': expected an integer >= 1, found 0"),
        ({"batch_size": -1}, r"key 'batch_size': expected an integer >= 1, found -1"),
        ({"max_width": 0}, r"key 'max_width': expected an integer >= 1, found 0"),
        ({"patience": -1}, r"key 'patience': expected an integer >= 0, found -1"),
        ({"seed": 2**32}, r"key 'seed': expected an integer from 0 to 4294967295, found 4294967296"),
        ({"data_seed": 2**70}, r"key 'data_seed': expected an integer from 0 to 4294967295, found 1180591620717411303424"),
        ({"lr": 0}, r"key 'lr': expected a positive number, found 0.0"),
        ({"lr": "nan"}, r"key 'lr': expected a positive number, found nan"),
        ({"rate": -0.01}, r"key 'rate': expected a positive number from 1e-18 to 1e\+18, found -0.01"),
        ({"sigma_theta": "inf"}, r"key 'sigma_theta': expected a positive number from 1e-18 to 1e\+18, found inf"),
        ({"momentum": -0.1}, r"key 'momentum': expected a number >= 0, found -0.1"),
        ({"hidden_layers": 0}, r"key 'hidden_layers': expected an integer >= 1 for model=awnn, found 0"),
        ({"compress_start_epoch": 10, "compress_end_epoch": 5}, r"key 'compress_end_epoch': expected an epoch >= compress_start_epoch=10, found 5"),
        ({"lr_schedule": "multistep", "lr_milestones": "50,x"}, r"key 'lr_milestones': expected comma-separated positive epochs"),
        ({"epochs": "ten"}, r"key 'epochs': expected int, found 'ten'"),
        ({"epochs": 2.5}, r"key 'epochs': expected int, found 2.5"),
        ({"epochs": True}, r"key 'epochs': expected int, found True"),
        ({"lr": "fast"}, r"key 'lr': expected float, found 'fast'"),
        ({"activation": ["relu"]}, r"key 'activation': expected str, found \['relu'\]"),
    ],
)
def test_train_config_rejects_bad_value_naming_key(values, message):
    with pytest.raises(ConfigError, match=message):
        TrainConfig.from_dict(values)


def test_train_config_unknown_key_suggests_close_match():
    with pytest.raises(ConfigError, match=r"^grid.yaml: unknown key 'sigma_teta' \(did you mean 'sigma_theta'\?\); expected one of: task, model, "):
        TrainConfig.from_dict({"sigma_teta": 1.0}, source="grid.yaml")
    with pytest.raises(ConfigError, match=r"unknown key 'zzz'; expected one of"):
        TrainConfig.from_dict({"zzz": 1})


def test_train_config_error_names_source_and_is_one_line():
    with pytest.raises(ConfigError) as info:
        TrainConfig.from_dict({"lr": -1}, source="command line")
    msg = str(info.value)
    assert msg.startswith("command line: key 'lr':") and "\n" not in msg
    assert isinstance(info.value, ValueError)


def test_train_config_fixed_model_allows_no_hidden_layer():
    c = TrainConfig.from_dict({"model": "fixed", "hidden_layers": 0})
    assert c.hidden_layers == 0


def test_train_config_milestones_parse():
    c = TrainConfig.from_dict({"lr_schedule": "multistep", "lr_milestones": "50, 100,150"})
    assert c.milestones() == [50, 100, 150]
    assert TrainConfig.from_dict({}).milestones() == []


@pytest.mark.parametrize("key", POSITIVE_NUMBER_KEYS + NON_NEGATIVE_NUMBER_KEYS)
def test_every_real_valued_key_the_model_holds_refuses_a_value_beyond_float32s_reach_naming_the_key_and_takes_its_bounds(key):
    # a rate of 1e39 (rho beyond float32) or a sigma_theta of 1e-39 (its decay beyond float32) was a traceback from
    # inside the model's construction; every real-valued key now has the one range, checked where the config is read
    for bad_value in (1e39, 1e19, -1.0, 1e-19):
        if bad_value == 1e-19 and key in NON_NEGATIVE_NUMBER_KEYS:
            bad_value = 1e-30  # (0 itself is allowed there)
        with pytest.raises(ConfigError, match=rf"^config: key '{key}': expected .*from 1e-18 to 1e\+18, found "):
            TrainConfig.from_dict({key: bad_value})
    for good in (NUMBER_MIN, NUMBER_MAX):
        assert getattr(TrainConfig.from_dict({key: good}), key) == good
    if key in NON_NEGATIVE_NUMBER_KEYS:
        assert getattr(TrainConfig.from_dict({key: 0}), key) == 0
