"""--fuse's default `auto` (issue #30, "fusion where it pays"): fused fixed-grid
trials on GPU trials and on CPUs (each its measured size); an integer as given."""
import pytest

from search.cli import build_parser
from search.commands.common import AUTO_FUSE_CPU, AUTO_FUSE_GPU, check_run_flags, resolve_fuse, settings_from
from search.errors import OptionError


def _args(*flags):
    return build_parser().parse_args(["compare", "--task", "spiralhard", *flags])


@pytest.mark.parametrize("flags,fuse", [((), AUTO_FUSE_CPU), (("--gpus-per-trial", "0.25"), AUTO_FUSE_GPU), (("--fuse", "auto"), AUTO_FUSE_CPU),
                                        (("--fuse", "auto", "--gpus-per-trial", "1"), AUTO_FUSE_GPU), (("--fuse", "8"), 8),
                                        (("--fuse", "1", "--gpus-per-trial", "0.5"), 1), (("--fuse", "1"), 1)])
def test_fuse_default_is_auto_fused_on_gpus_and_cpus(flags, fuse):
    args = _args(*flags)
    check_run_flags(args)
    assert settings_from(args).fuse == fuse


def test_fuse_auto_resolves_to_an_integer():
    assert AUTO_FUSE_CPU > 1
    assert resolve_fuse("auto", 0.0) == AUTO_FUSE_CPU and resolve_fuse("auto", 0.0625) == AUTO_FUSE_GPU and resolve_fuse(3, 1.0) == 3


@pytest.mark.parametrize("value", ["0", "-2"])
def test_fuse_below_one_is_an_option_error(value):
    with pytest.raises(OptionError, match=r"--fuse: expected an integer >= 1"):
        check_run_flags(_args("--fuse", value))


def test_fuse_that_is_neither_integer_nor_auto_names_both(capsys):
    with pytest.raises(SystemExit) as e:
        _args("--fuse", "many")
    assert e.value.code == 2
    assert "expected an integer >= 1 or 'auto', found 'many'" in capsys.readouterr().err
