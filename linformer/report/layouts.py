"""The layouts of Table 2 (scripts/table2.py --layout) and the options only some of them read: what the script's
parser checks, before the report's modules (numpy, matplotlib, torch) are imported."""

from __future__ import annotations

from ..errors import ConfigError
from ..experiments import pretrained, scratch

LAYOUTS = ("paper", "pretrained", "scratch")
# the reproduction each layout but paper reports: its plan's PROFILES and the DEFAULT_PROFILE its command runs
LAYOUT_PLANS = {"pretrained": pretrained, "scratch": scratch}


def layout_profile(layout: str, name: str | None):
    """The profile of the reproduction `layout` reports: `name`, or its plan's default where None (None for the paper
    layout, which has no profiles); ConfigError naming --profile for a profile the plan does not have."""
    plan = LAYOUT_PLANS.get(layout)
    if plan is None:
        return None
    name = plan.DEFAULT_PROFILE if name is None else name
    if name not in plan.PROFILES:
        raise ConfigError(f"--profile {name!r} is not one of the {layout} layout's: {', '.join(plan.PROFILES)}")
    return plan.PROFILES[name]


# the options of scripts/table2.py that only some layouts read
LAYOUT_OPTIONS = {"--profile": tuple(LAYOUT_PLANS), "--measure": ("pretrained",), "--no-measure": ("pretrained",),
                  "--no-by-length": ("pretrained",), "--subsets": ("paper",)}


def misplaced_option(layout: str, given: list[str]) -> str | None:
    """Why an option of `given` (LAYOUT_OPTIONS' flags) does not apply to `layout`, where one does not: it would be
    ignored without a word."""
    for flag in given:
        layouts = LAYOUT_OPTIONS.get(flag, LAYOUTS)
        if layout not in layouts:
            return f"{flag} applies to --layout {' or '.join(layouts)}, not {layout}"
    return None
