"""hal.channel.* and command_buffer.collective: npu-sim has a single device and no
collective channels, so these report UNIMPLEMENTED."""
from hal_driver.status import StatusCode, StatusError


def unimplemented(name: str):
    def fail(state, *args):
        raise StatusError(StatusCode.UNIMPLEMENTED,
                          f"hal.{name}: collective channels are not supported by npu-sim")
    return fail


EXPORTS = {name: unimplemented(name) for name in (
    "channel.create", "channel.split", "channel.rank_and_count", "command_buffer.collective")}
