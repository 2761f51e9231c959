"""The program layouts share one base and one error: each of the four refuses a chip that cannot hold it with a
``LayoutError`` naming what it needs (ga2_sw.layout.LayoutBase)."""

import pytest

from ga2_sw.chips import config_of
from ga2_sw.layout import Layout, LayoutBase, LayoutError
from ga2_sw.online_decode import OnlineDecodeLayout
from ga2_sw.online_program import Group, GroupedLayout
from ga2_sw.prefill import PrefillError, PrefillLayout

LONG = config_of("long")


@pytest.mark.parametrize("make, says", [
    (lambda: Layout(config_of("chapter", sp_words=64)), "Config field 'sp_words' is 64"),
    (lambda: OnlineDecodeLayout(config_of("chapter")), "need the online unit"),
    (lambda: OnlineDecodeLayout(LONG, key_digits=3), "1 or 2 int8 digits"),
    (lambda: GroupedLayout(config_of("chapter"), (Group(16, ((1, 0),), ((1, 0),)),), 16, 16), "online unit"),
    (lambda: GroupedLayout(LONG.replace(sp_words=256), (Group(64, ((1, 0),), ((1, 0),)),), 64, 64),
     "scratchpad"),
    (lambda: PrefillLayout(config_of("chapter"), 0), "needs 1 <= tokens"),
], ids=["decode", "online-unit", "key-digits", "grouped-unit", "grouped-fit", "prefill"])
def test_every_layout_refuses_with_a_layout_error(make, says):
    with pytest.raises(LayoutError, match=says):
        make()


def test_the_layouts_share_the_base():
    assert all(issubclass(k, LayoutBase) for k in (Layout, OnlineDecodeLayout, GroupedLayout, PrefillLayout))
    assert issubclass(PrefillError, LayoutError) and issubclass(LayoutError, ValueError)
