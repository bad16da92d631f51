"""courtier.core.tracking: which query parameters the intake removes, and nothing else."""

from __future__ import annotations

import pytest

from courtier.core.config import build_config
from courtier.core.errors import ConfigError
from courtier.core.tracking import TrackingParams
from courtier.core.urls import canonicalize


def cleaned(url: str, params: TrackingParams | None = None) -> str:
    return (params or TrackingParams()).clean(canonicalize(url)).url


@pytest.mark.parametrize(("raw", "expected"), [
    ("http://a.test/p?utm_source=news&utm_medium=mail", "http://a.test/p"),
    ("http://a.test/p?id=3&utm_campaign=x&b=&c", "http://a.test/p?id=3&b=&c"),
    ("http://a.test/p?fbclid=IwAR&gclid=1&msclkid=2&mc_cid=3&mc_eid=4", "http://a.test/p"),
    ("http://a.test/p?UTM_Source=x&z=1", "http://a.test/p?z=1"),    # names compared lower-case
    ("http://a.test/p?utm_source", "http://a.test/p"),             # a name without a value
    ("http://a.test/p?b=2&a=1", "http://a.test/p?b=2&a=1"),        # order kept (seed 000)
    ("http://a.test/p?utmost=1&x_utm_source=2", "http://a.test/p?utmost=1&x_utm_source=2"),
    ("http://a.test/p?q=utm_source%3Dx", "http://a.test/p?q=utm_source%3Dx"),  # a value
    ("http://a.test/p", "http://a.test/p"),
])
def test_the_default_list(raw: str, expected: str) -> None:
    assert cleaned(raw) == expected


def test_the_key_is_that_of_the_cleaned_url_and_removals_are_counted() -> None:
    params = TrackingParams()
    url = params.clean(canonicalize("http://a.test/p?utm_source=a&utm_term=b&k=1"))
    plain = canonicalize("http://a.test/p?k=1")
    assert (url.url, url.url_key, url.host_key, url.shard) == (
        plain.url, plain.url_key, plain.host_key, plain.shard)
    assert params.removed == 2
    same = canonicalize("http://a.test/p?k=1")
    assert params.clean(same) is same and params.removed == 2


def test_strip_and_keep_flags_with_domain_scopes() -> None:
    params = TrackingParams.from_specs(
        strip=["ref", "shop.test:sessionid", "sid*"], keep=["gclid", "news.test:utm_source"])
    assert cleaned("http://a.test/p?ref=x&gclid=1&sidx=2&sessionid=3", params) == \
        "http://a.test/p?gclid=1&sessionid=3"
    # a domain's rule applies to it and its subdomains only
    assert cleaned("http://www.shop.test/p?sessionid=3&q=1", params) == "http://www.shop.test/p?q=1"
    assert cleaned("http://news.test/p?utm_source=a&utm_medium=b", params) == \
        "http://news.test/p?utm_source=a"
    assert cleaned("http://other-news.test/p?utm_source=a", params) == "http://other-news.test/p"


@pytest.mark.parametrize("bad", ["", "a=b", "x?y", "*", "bad domain:ref", "a&b"])
def test_a_bad_value_names_the_flag(bad: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_config({"strip_params": (bad,)}, environ={})
    assert str(info.value).startswith(f"--strip-param {bad!r}: expected NAME")
    with pytest.raises(ConfigError, match=r"^--keep-param"):
        build_config({"keep_params": (bad,)}, environ={})
