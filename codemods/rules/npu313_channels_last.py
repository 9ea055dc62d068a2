"""NPU313: the channels-last rule."""

from __future__ import annotations

from codemods.framework.families.third_party import ThirdPartyRule, library_prefilter


class ChannelsLast(ThirdPartyRule):
    code = "NPU313"
    name = "channels-last"
    summary = "`torch.channels_last` is unsupported by Ascend's auto-migration: drop it unless measured on NPU"
    prefilter = library_prefilter("NPU313")

