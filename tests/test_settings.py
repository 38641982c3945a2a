"""The ``TAOSPEC_*`` seconds settings: defaults, what each accepts, and the message."""

from __future__ import annotations

import pytest

from taospec import settings
from taospec.errors import InvalidInput


@pytest.mark.parametrize("name", sorted(settings.SECONDS))
def test_each_setting_gives_its_default_or_the_seconds_written(name: str) -> None:
    setting = settings.SECONDS[name]
    assert settings.seconds(name, {}) == setting.default
    assert settings.seconds(name, {name: "  "}) == setting.default
    assert settings.seconds(name, {name: " 2.5 "}) == 2.5
    if setting.zero:
        assert settings.seconds(name, {name: "0"}) == 0
    else:
        with pytest.raises(InvalidInput):
            settings.seconds(name, {name: "0"})
    for bad in ("-1", "soon", "nan", "inf", "-inf", "1e999"):
        with pytest.raises(InvalidInput) as refused:
            settings.seconds(name, {name: bad})
        assert str(refused.value) == (
            f"{name}={bad!r}: give the seconds {setting.what}, e.g. {setting.default:g}"
        )


def test_check_refuses_the_first_bad_setting_and_passes_a_clean_environment() -> None:
    settings.check({})
    settings.check(dict.fromkeys(settings.SECONDS, "1"))
    with pytest.raises(InvalidInput, match="TAOSPEC_LAUNCH_GRACE='later'"):
        settings.check({"TAOSPEC_LAUNCH_GRACE": "later", "PATH": "/bin"})
