"""Errors caused by user input: ``main.py`` prints their message without a traceback."""


class LanternUserError(Exception):
    """Something in the config, the files or the command line needs fixing by the user."""


class ConfigError(LanternUserError, ValueError):
    """A config entry is malformed; the message says which one and how to fix it."""


class UserCodeError(LanternUserError):
    """The project's own code raised where Lantern calls it to set a run up (a config entry's class, a dataset's
    ``dataset[0]``): the message names the place and the error in one line; the traceback, that of
    ``__cause__``, goes to the run's log."""


class ConfigEntryError(ConfigError, UserCodeError):
    """Building a config entry raised: ``config['optimizer'] (Adam): TypeError: ...``."""


class DatasetItemError(UserCodeError):
    """A dataset's ``__getitem__`` or a collate function raised: the message names the datapoint (its index, its
    file where the dataset says one) in one line; the traceback goes to the run's log."""


class WorkDirError(LanternUserError):
    """The work dir cannot be used for this run."""


class CheckpointError(LanternUserError):
    """A checkpoint is missing or does not fit the model."""


class ModelContractError(LanternUserError):
    """The model's ``forward`` does not return what the runner, criterion and metric expect."""


class MetricContractError(LanternUserError):
    """The metric's buffer or ``summarize`` is not what the runner, the scores file and the viewer read."""


class DatasetContractError(LanternUserError):
    """A datapoint is not ``{'inputs': {...}, 'labels': {...}, 'meta_info': {'idx': i, ...}}`` as documented."""


_WORKER_WRAPPING = " in DataLoader worker process "


def from_worker(exc: BaseException) -> bool:
    """Whether ``exc`` is a DataLoader worker's, re-raised in the main process with the worker's whole traceback as
    its message."""
    message = str(exc)
    return message.startswith("Caught ") and _WORKER_WRAPPING in message.split("\n", 1)[0]


def user_message(exc: LanternUserError) -> str:
    """The message of ``exc`` alone: a DataLoader worker re-raises it in the main process with the worker's
    whole traceback as its message, which would bury the one line the user needs under a traceback."""
    message = str(exc)
    if not from_worker(exc):
        return message
    marker = f"{type(exc).__name__}: "
    return message[message.rfind(marker) + len(marker):].strip()


def describe_exception(exc: BaseException) -> str:
    """``Type: message`` in one line: the message's first line (the rest is in the traceback)."""
    lines = str(exc).strip().splitlines()
    more = " ..." if len(lines) > 1 else ""
    return f"{type(exc).__name__}: {lines[0]}{more}" if lines else type(exc).__name__
